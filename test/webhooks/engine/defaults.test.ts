// The production defaults docs/events.md states (#retries, #what-counts-as-delivered,
// #switching-off), read as the service reads them (no environment).
import { Cause, ConfigProvider, Effect, Exit } from "effect"
import { describe, expect, it } from "vitest"
import { WebhookConfig } from "../../../src/platform/config.ts"
import { ENGINE_DEFAULTS, EngineMisconfigured } from "../../../src/webhooks/engine/engine.ts"
import { resolveSettings } from "../../../src/webhooks/engine/options.ts"
import { parseRetryScheduleOrThrow } from "../../../src/domain/retry-schedule.ts"
import { DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_TIMEOUT_MS } from "../../../src/webhooks/net/sender.ts"

const MINUTE = 60_000
const HOUR = 60 * MINUTE

describe("delivery defaults", () => {
  it("retries after 15 minutes, 1 hour, 4 hours, 12 hours and 1 day: 6 attempts", async () => {
    const config = await Effect.runPromise(
      Effect.gen(function* () {
        return yield* WebhookConfig
      }).pipe(Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnvRecord({}))))
    )
    const schedule = parseRetryScheduleOrThrow(config.retrySchedule)
    expect(schedule.delaysMs).toEqual([15 * MINUTE, HOUR, 4 * HOUR, 12 * HOUR, 24 * HOUR])
    expect(schedule.maxAttempts).toBe(6)
    expect(config.allowedNetworks).toBe("")
  })

  it("a receiver has 10 seconds to answer, the log keeps 30 days, 15 failed deliveries in a row switch an endpoint off", () => {
    expect(DEFAULT_TIMEOUT_MS).toBe(10_000)
    expect(ENGINE_DEFAULTS.timeoutMs).toBe(10_000)
    expect(ENGINE_DEFAULTS.retentionMs).toBe(30 * 24 * HOUR)
    expect(ENGINE_DEFAULTS.switchOffAfter).toBe(15)
    expect(DEFAULT_MAX_RESPONSE_BYTES).toBeGreaterThan(0)
  })

  it("an engine whose leases cannot cover what they must does not start (EngineMisconfigured); other options keep their defaults", () => {
    const refused = (options: Parameters<typeof resolveSettings>[0]) => {
      const exit = Effect.runSyncExit(resolveSettings(options))
      return Exit.isFailure(exit) ? Cause.squash(exit.cause) : null
    }
    // A claim lease must cover two timeouts and 5 s; a partition lease three heartbeats.
    expect(refused({ leaseMs: 2 * ENGINE_DEFAULTS.timeoutMs + 4_999 })).toBeInstanceOf(EngineMisconfigured)
    expect(refused({ heartbeatMs: 1_000, partitionLeaseMs: 2_999 })).toBeInstanceOf(EngineMisconfigured)
    expect(
      refused({ leaseMs: 2 * ENGINE_DEFAULTS.timeoutMs + 5_000, heartbeatMs: 1_000, partitionLeaseMs: 3_000 })
    ).toBeNull()
    const settings = Effect.runSync(resolveSettings({ concurrency: 4, perOrigin: undefined }))
    expect(settings).toEqual({ ...ENGINE_DEFAULTS, concurrency: 4 })
  })
})
