// The demo tools, in the one command tree: `seed` loads the demo app's tables and data,
// `simulate` plays the app. `npm run seed` and `npm run simulate` are these commands
// (src/faces/cli/seed.ts, simulate.ts); `npm run admin -- seed` is the same.
import { Effect } from "effect"
import { Command, Flag } from "effect/cli"
import { ensureDemoAppSchema } from "../../../platform/db/demo-schema.ts"
import { seedDemoOnce } from "../../../seed/demo.ts"
import { openDatabase } from "../../../seed/database.ts"
import { simulate as runSimulation, type SimulationProgress } from "../../../seed/simulate.ts"
import { ExitWith, json } from "../support.ts"
import { parseShortDuration, SHORT_DURATION_FORMS } from "../../../domain/time.ts"

/** The demo database for as long as `use` runs: DATABASE_URL, else the embedded one. */
const withDemoDatabase = <A>(use: (db: Awaited<ReturnType<typeof openDatabase>>) => Promise<A>, connections?: number) =>
  Effect.acquireUseRelease(
    Effect.tryPromise({
      try: () => openDatabase(connections),
      catch: (e) => (e instanceof Error ? e : new Error(String(e)))
    }),
    (db) => Effect.tryPromise({ try: () => use(db), catch: (e) => (e instanceof Error ? e : new Error(String(e))) }),
    (db) => Effect.promise(() => db.close())
  )

export const seed = Command.make(
  "seed",
  {
    schemaOnly: Flag.Boolean("schema-only").pipe(
      Flag.withDescription("The app's tables alone: no demo rows"),
      Flag.withDefault(false)
    ),
    json
  },
  (args) =>
    withDemoDatabase(async (db) => {
      const created = await ensureDemoAppSchema(db.sql)
      if (args.schemaOnly) {
        const message = created
          ? "Made the demo's app tables (schema app); no rows."
          : "Schema app is already there; nothing changed."
        return args.json ? JSON.stringify({ schemaCreated: created }) : message
      }
      const result = await seedDemoOnce(db.sql)
      if (args.json) return JSON.stringify(result.seeded ? { seeded: true, ...result.summary } : result)
      if (!result.seeded) return `Demo data already present (company ${result.host} exists); nothing changed.`
      const s = result.summary
      const total = Object.values(s.counts).reduce((a, b) => a + b, 0)
      const names = s.companies.map((c) => `"${c.name}" (${c.host}, ${c.tier} tier)`).join(" and ")
      const counts = Object.entries(s.counts)
        .map(([table, n]) => `${n} ${table.replaceAll("_", " ")}`)
        .join(", ")
      return `Seeded ${names} in ${s.elapsedMs} ms: ${total} rows (${counts}).`
    }).pipe(Effect.flatMap((line) => Effect.sync(() => process.stdout.write(`${line}\n`))))
).pipe(
  Command.withDescription(
    "Make the demo's copy of the app's tables (schema app, sql/demo/app.sql) where the database has none, then load the demo companies " +
      "(acme.localhost, globex.localhost) unless acme.localhost is there. Never touches the service's own schema. " +
      "Uses DATABASE_URL, else the embedded PostgreSQL under DATA_DIR (default ./.data) on EMBEDDED_PG_PORT (default 54329)."
  )
)

/** --duration in milliseconds. */
const parseDuration = (text: string): number => {
  const ms = parseShortDuration(text)
  if (ms === undefined) throw new Error(SHORT_DURATION_FORMS)
  return ms
}

/** Refuses 0 and below, with the one message (--rate, --concurrency, --seed). */
const aboveZero = Flag.filter(
  (n: number) => n > 0,
  () => "a number above 0"
)

const progressLine = (p: SimulationProgress) => {
  const done = Object.entries(p.operations).filter(([, n]) => n > 0)
  const total = done.reduce((s, [, n]) => s + n, 0)
  const events = Object.values(p.events).reduce((s, n) => s + n, 0)
  return (
    `${(p.elapsedMs / 1000).toFixed(1)}s: ${total} operations, ${events} events expected` +
    (p.skipped ? `, ${p.skipped} skipped` : "") +
    (p.failed ? `, ${p.failed} FAILED` : "") +
    ` | ${done.map(([k, n]) => `${k} ${n}`).join(", ")}`
  )
}

export const simulate = Command.make(
  "simulate",
  {
    rate: Flag.Finite("rate").pipe(Flag.withDescription("Operations per second"), Flag.withDefault(5), aboveZero),
    duration: Flag.String("duration").pipe(
      Flag.withDescription("How long: 500ms, 30s, 5m, 1h (a bare number is seconds); default: until Ctrl-C"),
      Flag.mapTryCatch(parseDuration, (e) => (e instanceof Error ? e.message : String(e))),
      Flag.optional
    ),
    company: Flag.String("company").pipe(
      Flag.withDescription("The company's host"),
      Flag.withDefault("acme.localhost")
    ),
    concurrency: Flag.Int("concurrency").pipe(
      Flag.withDescription("Operations in flight at once"),
      Flag.withDefault(1),
      aboveZero
    ),
    seed: Flag.Int("seed").pipe(Flag.withDescription("Random seed, for a repeatable run"), aboveZero, Flag.optional),
    json
  },
  (args) =>
    Effect.gen(function* () {
      const out = args.json ? process.stderr : process.stdout
      const duration = args.duration._tag === "Some" ? args.duration.value : undefined
      const seedValue = args.seed._tag === "Some" ? args.seed.value : undefined
      // Ctrl-C or SIGTERM finishes the operation in flight; a second Ctrl-C leaves at once.
      const stop = new AbortController()
      const onSignal = (signal: NodeJS.Signals) => {
        if (stop.signal.aborted) process.exit(130)
        out.write(`${signal}: finishing the operation in flight…\n`)
        stop.abort()
      }
      process.on("SIGINT", onSignal)
      process.on("SIGTERM", onSignal)
      const result = yield* withDemoDatabase(async (db) => {
        out.write(
          `Simulating ${args.company} at ${args.rate}/s${duration === undefined ? " until stopped (Ctrl-C)" : ` for ${duration / 1000}s`}…\n`
        )
        return runSimulation(db.sql, {
          rate: args.rate,
          company: args.company,
          concurrency: args.concurrency,
          signal: stop.signal,
          onProgress: (p) => out.write(`${progressLine(p)}\n`),
          ...(duration === undefined ? {} : { durationMs: duration }),
          ...(seedValue === undefined ? {} : { seed: seedValue })
        })
      }, args.concurrency + 1)
      if (args.json) process.stdout.write(`${JSON.stringify(result)}\n`)
      out.write(`Done. ${progressLine(result)}\n`)
      const events = Object.entries(result.events).filter(([, n]) => n > 0)
      out.write(`Events expected: ${events.map(([k, n]) => `${k} ${n}`).join(", ") || "none"}\n`)
      for (const e of result.errors) out.write(`  failure: ${e}\n`)
      if (result.failed > 0) return yield* new ExitWith({ code: 1 })
    })
).pipe(
  Command.withDescription(
    "Write app records like the app would, --rate operations per second, until Ctrl-C or --duration. Progress every 5 s; " +
      "totals at the end (--json: the totals as JSON on stdout, progress on stderr)."
  )
)
