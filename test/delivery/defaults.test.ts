// The production defaults the spec fixes, read as the service reads them (no environment).
import { ConfigProvider, Effect } from "effect"
import { describe, expect, it } from "vitest"
import { WebhookConfig } from "../../src/platform/config.ts"
import { ENGINE_DEFAULTS } from "../../src/delivery/engine.ts"
import { parseRetryScheduleOrThrow } from "../../src/domain/retry-schedule.ts"
import { DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_TIMEOUT_MS } from "../../src/delivery/sender.ts"

const MINUTE = 60_000
const HOUR = 60 * MINUTE

describe("delivery defaults (spec 6)", () => {
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
})
