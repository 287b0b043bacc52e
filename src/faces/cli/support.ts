// What every admin command shares: the flags every command accepts (--as, --json), the
// database (opened only when a command runs, so --help needs none), and output that is
// one JSON value on stdout with --json, or text for a person.
import { Console, Data, Effect, Layer, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import * as Database from "../../platform/db/Database.ts"
import { Sql } from "../../platform/db/Sql.ts"
import type { DomainError, Reason } from "../../domain/errors.ts"
import { findAdmin, findCompany, type AdminUser, type Company } from "../../access/identity.ts"

/** --json: print the answer as one JSON value on stdout. */
export const json = Flag.Boolean("json").pipe(
  Flag.withDescription("Print the answer as one JSON value on stdout"),
  Flag.withDefault(false)
)

/** --as for commands that change something. */
export const asRequired = Flag.String("as").pipe(Flag.withDescription("Your e-mail: an admin of the company"))

/** --as for commands that only read (checked when given). */
export const asOptional = Flag.String("as").pipe(
  Flag.withDescription("Your e-mail: an admin of the company (checked when given)"),
  Flag.optional
)

export const company = Flag.String("company").pipe(
  Flag.withDescription("The company, by id or host (e.g. acme.safety.example)")
)
export const companyOptional = company.pipe(Flag.optional)

/** The flags of a change made by an admin: --as, --company (checked against the admin's), --json. */
export const asAdminFlags = { company: companyOptional, as: asRequired, json }

/** The `id` argument of a command about one thing; the description says whose, and where ids are listed. */
export const idArgument = (description: string) => Argument.String("id").pipe(Argument.withDescription(description))

/** A text flag that may be left out. */
export const optionalText = (name: string, description: string) =>
  Flag.String(name).pipe(Flag.withDescription(description), Flag.optional)

/** Runs a command's work against the databases (DATABASE_URL and SERVICE_DATABASE_URL, else the embedded one, migrated). */
export const withDatabase = <A, E, R>(
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E | Error, Exclude<R, Database.Database | Database.AppDatabase | Sql>> =>
  Effect.provide(
    effect,
    Sql.layer.pipe(Layer.provideMerge(Database.layer)) as Layer.Layer<
      Database.Database | Database.AppDatabase | Sql,
      Error
    >
  ) as Effect.Effect<A, E | Error, Exclude<R, Database.Database | Database.AppDatabase | Sql>>

/**
 * A command whose work runs against the databases (withDatabase), as most admin commands do:
 * `run` is that work, given the parsed flags and arguments.
 */
export const databaseCommand = <Name extends string, const Config extends Command.Command.Config, E, R>(
  name: Name,
  config: Config,
  run: (args: Command.Command.Config.Infer<Config>) => Effect.Effect<void, E, R>
) => Command.make(name, config, (args) => withDatabase(run(args)))

/** The items of a comma-separated flag (e.g. --events a,b): trimmed, empty ones dropped. */
export const commaList = (text: string): Array<string> =>
  text
    .split(",")
    .map((item) => item.trim())
    .filter((item) => item !== "")

/** The company named by --company, and the admin named by --as in it. */
export const companyAndAdmin = (
  companyRef: string,
  email: string
): Effect.Effect<{ company: Company; actor: AdminUser }, DomainError, Sql> =>
  Effect.gen(function* () {
    const company = yield* findCompany(companyRef)
    const actor = yield* findAdmin(email, company)
    return { company, actor }
  })

export const optionalAdmin = (companyRef: string, email: Option.Option<string>) =>
  Effect.gen(function* () {
    const company = yield* findCompany(companyRef)
    const actor = Option.isSome(email) ? yield* findAdmin(email.value, company) : undefined
    return { company, actor }
  })

/**
 * The command ran and printed its answer, but what it checked did not pass (a receiver that
 * refused a test event): exit code 1, with this message on stderr, so scripts can tell;
 * `reason` chooses a hint (errors.ts).
 */
export class CheckFailed extends Data.TaggedError("CheckFailed")<{
  readonly message: string
  readonly reason?: Reason
}> {}

/**
 * The command printed its answer, and its exit code says more (status: 1 degraded, 2 broken),
 * with nothing on stderr: the answer is on stdout already.
 */
export class ExitWith extends Data.TaggedError("ExitWith")<{ readonly code: number }> {}

/** Prints the answer: JSON for scripts, or the human text. */
export const output = (asJson: boolean, value: unknown, human: () => string) =>
  asJson ? Console.log(JSON.stringify(value, null, 2)) : Console.log(human())

/** A plain table: a header row and aligned columns. */
export const table = (headers: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells
      .map((c, i) => (c ?? "").padEnd(widths[i]!))
      .join("  ")
      .trimEnd()
  return [line(headers), ...rows.map(line)].join("\n")
}

/** A titled table, or a sentence saying there is nothing to list. */
export const listing = (
  items: ReadonlyArray<unknown>,
  text: { readonly empty: string; readonly title: string },
  headers: ReadonlyArray<string>,
  rows: () => ReadonlyArray<ReadonlyArray<string>>
): string => (items.length === 0 ? text.empty : [text.title, "", table(headers, rows())].join("\n"))

export const when = (iso: string | null, none = "-") =>
  iso === null ? none : iso.replace("T", " ").replace(/\.\d{3}Z$/, "Z")
