// npm run admin -- <command>: the admin CLI. Finds the database like the service does
// (DATABASE_URL, else the embedded server under DATA_DIR, started if needed and stopped at
// exit only if this process started it) and applies migrations before a command runs.
import { NodeServices } from "@effect/platform-node"
import { Effect, Layer, Logger, References } from "effect"
import { runAdminCli } from "./main.ts"

// Logs go to stderr (stdout is the answer), warnings and worse only.
const Quiet = Layer.mergeAll(
  Logger.layer([Logger.withConsoleError(Logger.formatSimple)]),
  Layer.succeed(References.MinimumLogLevel, "Warn")
)

const code = await Effect.runPromise(
  runAdminCli(process.argv.slice(2)).pipe(Effect.provide(Layer.mergeAll(NodeServices.layer, Quiet)))
)
process.exitCode = code
