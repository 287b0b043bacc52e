// npm run simulate -- --rate 5 [--duration 60s] [--company acme.localhost]: the `simulate`
// command of the one command tree (commands/demo.ts). Plays the app at a steady rate until
// stopped (Ctrl-C, SIGTERM) or the duration ends.
import { runCliProcess } from "./run.ts"

await runCliProcess(["simulate", ...process.argv.slice(2)])
