// npm run seed [-- --schema-only] [-- --json]: the `seed` command of the one command tree
// (commands/demo.ts). Makes the demo's app tables where there are none, then loads the demo
// companies into them, once. The service's schema is not touched.
import { runCliProcess } from "./run.ts"

await runCliProcess(["seed", ...process.argv.slice(2)])
