// The admin CLI's command groups. Each module exports one top-level command; adding a
// group is one line here (e.g. `export { webhooks } from "./webhooks.ts"`).
export { database } from "./database.ts"
export { keys } from "./keys.ts"
export { listen } from "./listen.ts"
export { tokens } from "./tokens.ts"
export { activity, deliveries, endpoints, subscriptions } from "./webhooks.ts"
export { rebuildViewsCommand, replayCommand, statusCommand } from "./operations.ts"
export { seed, simulate } from "./demo.ts"
export { capture } from "./capture.ts"
