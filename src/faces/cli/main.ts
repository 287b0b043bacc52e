// The admin CLI: `npm run admin -- <command>`. Commands come from commands/index.ts.
// stdout carries only the answer (one JSON value with --json); help asked for goes to
// stdout too. Mistakes in the command line go to stderr with exit code 2; a refused or
// failed operation goes to stderr with exit code 1.
import { createRequire } from "node:module"
import { Cause, Console, Effect, Exit, Layer, Option, Result } from "effect"
import { CliError, CliOutput, Command } from "effect/cli"
import { isDatabaseUnavailable } from "../../platform/db/stray-failures.ts"
import { SecretsKeyMismatch } from "../../platform/secrets/key-check.ts"
import { isDomainError } from "../../domain/errors.ts"
import { cliError } from "./errors.ts"
import * as Commands from "./commands/index.ts"
import { CheckFailed, ExitWith } from "./support.ts"

export const PROGRAM = "npm run admin --"

/** The service's version, from package.json, shown by `--version`. */
export const VERSION: string = (createRequire(import.meta.url)("../../../package.json") as { version: string }).version

export const AdminCommand = Command.make("admin").pipe(
  Command.withDescription(
    "Administer the Safety Records Service: API keys, admin tokens and more. Every command accepts --as <admin e-mail> and --json."
  ),
  Command.withSubcommands(Object.values(Commands))
)

/** Usage mistakes on stderr, briefly, with where to find help. */
const Presenter = CliOutput.layerPresenter({
  present: (event) =>
    event._tag === "InvalidInvocation"
      ? Effect.gen(function* () {
          const formatter = yield* CliOutput.Formatter
          const path = event.commandPath.slice(1).join(" ")
          yield* Console.error(formatter.formatErrors(event.errors).trim())
          yield* Console.error(`\nSee: ${PROGRAM} ${path === "" ? "" : `${path} `}--help`)
        })
      : CliOutput.defaultPresenter.present(event)
})

const Plain = CliOutput.layer(CliOutput.defaultFormatter({ colors: false }))

/** Runs the CLI on these arguments; resolves to the process exit code. */
export const runAdminCli = (args: ReadonlyArray<string>) =>
  Command.runWith(AdminCommand, { version: VERSION })(args).pipe(
    Effect.provide(Layer.mergeAll(Presenter, Plain)),
    Effect.exit,
    Effect.flatMap((exit) => {
      if (Exit.isSuccess(exit)) return Effect.succeed(0)
      const failure = Cause.findErrorOption(exit.cause)
      if (Option.isSome(failure)) {
        const error = failure.value
        if (error instanceof ExitWith) return Effect.succeed(error.code)
        // SecretsKeyMismatch: the webhook commands' key is not the database's (docs/deployment.md#several-replicas).
        if (isDomainError(error) || error instanceof CheckFailed || error instanceof SecretsKeyMismatch)
          return Effect.as(Console.error(cliError(error)), 1)
        if (CliError.isCliError(error)) return Effect.succeed(2) // already presented
        return Effect.as(Console.error(`error: ${error instanceof Error ? error.message : String(error)}`), 1)
      }
      if (Cause.hasInterruptsOnly(exit.cause)) return Effect.succeed(130)
      // The database gone mid-command (stopped, restarting, unreachable): said plainly, no stack.
      const defect = Cause.findDefect(exit.cause)
      if (Result.isSuccess(defect) && isDatabaseUnavailable(defect.success))
        return Effect.as(
          Console.error(
            `error: the database stopped answering (${(defect.success as Error).message}): what the command wrote before stays written; run it again, or check with list or status, once the database is back`
          ),
          1
        )
      return Effect.as(Console.error(`error: ${Cause.pretty(exit.cause)}`), 1)
    })
  )
