// npm run admin -- <command>: the admin CLI. Finds the database like the service does
// (DATABASE_URL, else the embedded server under DATA_DIR, started if needed and stopped at
// exit only if this process started it) and applies migrations before a command runs.
import { runCliProcess } from "./run.ts"

await runCliProcess(process.argv.slice(2))
