// An engine process for crash tests: the real engine against ENGINE_URL until killed. Every
// 100 ms it prints its stats as a JSON line; SIGTERM shuts it down gracefully.
import { Effect, Exit, Scope } from "effect"
import { connect } from "../../../src/platform/db/Database.ts"
import { parseAllowedNetworksOrThrow } from "../../../src/webhooks/net/address-guard.ts"
import { makeEngine } from "../../../src/webhooks/engine/engine.ts"
import { parseRetryScheduleOrThrow } from "../../../src/domain/retry-schedule.ts"

const sql = connect(process.env.ENGINE_URL!, 6)
const scope = Effect.runSync(Scope.make())
const engine = await Effect.runPromise(
  Scope.provide(scope)(
    makeEngine({
      sql,
      secretsKey: Buffer.from(process.env.ENGINE_SECRETS_KEY!, "base64"),
      allowed: parseAllowedNetworksOrThrow("127.0.0.0/8"),
      ca: process.env.ENGINE_CA!,
      schedule: parseRetryScheduleOrThrow("200ms,200ms,200ms,200ms,200ms"),
      timeoutMs: 3_000,
      leaseMs: 11_000,
      pollMs: 300,
      partitionLeaseMs: Number(process.env.ENGINE_PARTITION_LEASE_MS ?? 1_500),
      heartbeatMs: 300
    })
  )
)
const report = async () =>
  process.stdout.write(`${JSON.stringify({ id: engine.instanceId, ...(await Effect.runPromise(engine.stats)) })}\n`)
const timer = setInterval(() => void report(), 100)
process.on("SIGTERM", () => {
  clearInterval(timer)
  void Effect.runPromise(Scope.close(scope, Exit.void))
    .then(() => sql.end({ timeout: 2 }))
    .then(() => process.exit(0))
})
