// The engine's options and their defaults, resolved once when the engine starts.
import type { Sql } from "postgres"
import { Effect } from "effect"
import type { RetrySchedule } from "../../domain/retry-schedule.ts"
import type { AllowedNetworks, Lookup } from "../net/address-guard.ts"
import { DEFAULT_TIMEOUT_MS, type SendOptions } from "../net/sender.ts"
import { EngineMisconfigured } from "./errors.ts"

export type EngineOptions = {
  readonly sql: Sql
  readonly secretsKey: Uint8Array
  readonly schedule: RetrySchedule
  readonly allowed: AllowedNetworks
  readonly lookup?: Lookup | undefined
  readonly ca?: SendOptions["ca"] | undefined
  /** Queue a mail with each alert (SMTP_URL is set: alerts/mail.ts). */
  readonly alertMail?: boolean | undefined
  /** An answer must be complete within this (10 s: docs/events.md#what-counts-as-delivered). */
  readonly timeoutMs?: number | undefined
  /** Claim lease; at least 2 timeouts + 5 s. An attempt only starts if it can end within its lease. */
  readonly leaseMs?: number | undefined
  /** Attempts in flight in this process, in all. */
  readonly concurrency?: number | undefined
  /** Attempts in flight per receiver origin (scheme://host:port), so one slow receiver cannot take every slot. */
  readonly perOrigin?: number | undefined
  /** Safety poll, in case a notification is lost. */
  readonly pollMs?: number | undefined
  readonly fanoutBatch?: number | undefined
  /**
   * Fan-out passes start at least this far apart (real time): under a stream of commits each
   * pass takes the events of its gap in one read instead of one read per commit.
   */
  readonly fanoutGapMs?: number | undefined
  /** Deliveries in a row failing every attempt that switch an endpoint off (15: docs/events.md#switching-off). */
  readonly switchOffAfter?: number | undefined
  readonly retentionMs?: number | undefined
  readonly purgeEveryMs?: number | undefined
  /** On shutdown, in-flight attempts get this long to finish; the rest are handed back. */
  readonly shutdownGraceMs?: number | undefined
  readonly maxResponseBytes?: number | undefined
  /**
   * A fanned-out delivery still unwritten after this long (a slow or hung receiver) is written:
   * waiting for a send slot, as a row due at once (claimed again when its receiver has room);
   * sending, as a row leased to this process.
   */
  readonly writeAfterMs?: number | undefined
  /** Lease of a fan-out partition (the database's clock); a killed process's partitions are taken after it. */
  readonly partitionLeaseMs?: number | undefined
  /** How often the partition leases are renewed and shared out again. */
  readonly heartbeatMs?: number | undefined
  /** Timeouts or connection failures in a row that open a destination's circuit. */
  readonly circuitAfter?: number | undefined
  /** From a circuit's opening to its first probe; the wait doubles after each probe that fails. */
  readonly circuitProbeMs?: number | undefined
  /** The longest wait between probes. */
  readonly circuitProbeMaxMs?: number | undefined
}

const DAY = 86_400_000

export const ENGINE_DEFAULTS = {
  timeoutMs: DEFAULT_TIMEOUT_MS,
  leaseMs: 60_000,
  concurrency: 64,
  perOrigin: 8,
  pollMs: 5_000,
  fanoutBatch: 1_000,
  fanoutGapMs: 25,
  switchOffAfter: 15,
  retentionMs: 30 * DAY,
  purgeEveryMs: 3_600_000,
  shutdownGraceMs: 11_000,
  maxResponseBytes: 16 * 1024,
  writeAfterMs: 2_000,
  partitionLeaseMs: 10_000,
  heartbeatMs: 1_000,
  circuitAfter: 5,
  circuitProbeMs: 10_000,
  circuitProbeMaxMs: 300_000
} as const

/** The numbers the steps run by: every option with its default filled in. */
export type Settings = { readonly [K in keyof typeof ENGINE_DEFAULTS]: number }

/** The options with defaults; dies (EngineMisconfigured) when leases are too short for what they cover. */
export const resolveSettings = (
  options: { readonly [K in keyof Settings]?: number | undefined }
): Effect.Effect<Settings> => {
  const o: Settings = { ...ENGINE_DEFAULTS, ...defined(options) }
  if (o.leaseMs < 2 * o.timeoutMs + 5_000) {
    return Effect.die(
      new EngineMisconfigured({
        message: `delivery lease (${o.leaseMs} ms) must be at least two timeouts (${o.timeoutMs} ms) plus 5 s`
      })
    )
  }
  if (o.heartbeatMs * 3 > o.partitionLeaseMs) {
    return Effect.die(
      new EngineMisconfigured({
        message: `partition lease (${o.partitionLeaseMs} ms) must be at least three heartbeats (${o.heartbeatMs} ms)`
      })
    )
  }
  return Effect.succeed(o)
}

const defined = <T extends object>(o: T): Partial<T> =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>
