// Runs the command tree (main.ts) as a process: stdout is the answer, logs go to stderr
// (warnings and worse only), and the exit code is the command's.
import { NodeServices } from "@effect/platform-node"
import { Effect, Layer, Logger, References } from "effect"
import { runAdminCli } from "./main.ts"

const Quiet = Layer.mergeAll(
  Logger.layer([Logger.withConsoleError(Logger.formatSimple)]),
  Layer.succeed(References.MinimumLogLevel, "Warn")
)

export const runCliProcess = async (args: ReadonlyArray<string>): Promise<void> => {
  process.exitCode = await Effect.runPromise(
    runAdminCli(args).pipe(Effect.provide(Layer.mergeAll(NodeServices.layer, Quiet)))
  )
}
