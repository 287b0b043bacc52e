// An engine process for bench/webhooks.ts's two-process row: the real engine on the bench
// database, forked, driven over IPC. Every receiver name resolves to loopback, as in the
// benchmark's own engine.
import { Effect, Exit, Scope } from "effect"
import { connect } from "../src/platform/db/Database.ts"
import { parseAllowedNetworksOrThrow, type Lookup } from "../src/webhooks/net/address-guard.ts"
import { makeEngine, type DeliveryEngineShape } from "../src/webhooks/engine/engine.ts"
import { parseRetryScheduleOrThrow } from "../src/domain/retry-schedule.ts"
import { closeSenderConnections } from "../src/webhooks/net/sender.ts"

type Start = { readonly cmd: "start"; readonly url: string; readonly secretsKey: string; readonly ca: string }
type Command = Start | { readonly cmd: "stop" }

let stop: (() => Promise<void>) | null = null
process.on("message", (m: Command) => {
  if (m.cmd === "start") {
    const sql = connect(m.url, 10)
    const lookup: Lookup = async () => [{ address: "127.0.0.1", family: 4 }]
    const scope = Effect.runSync(Scope.make())
    let engine: DeliveryEngineShape
    void Effect.runPromise(
      Scope.provide(scope)(
        makeEngine({
          sql,
          secretsKey: Buffer.from(m.secretsKey, "base64"),
          allowed: parseAllowedNetworksOrThrow("127.0.0.0/8"),
          ca: m.ca,
          lookup,
          schedule: parseRetryScheduleOrThrow("15m,1h,4h,12h,1d")
        })
      )
    ).then((e) => {
      engine = e
      stop = async () => {
        if (process.env.BENCH_CPU)
          process.stderr.write(
            `  engine process ${process.pid}: ${JSON.stringify(await Effect.runPromise(engine.stats))}\n`
          )
        await Effect.runPromise(Scope.close(scope, Exit.void))
        await closeSenderConnections()
        await sql.end({ timeout: 5 })
      }
      process.send!({ started: true })
    })
  } else if (m.cmd === "stop") {
    void (stop ?? (async () => {}))().then(() => process.exit(0))
  }
})
process.send!({ ready: true })
