// A delivery in memory (Item): what an attempt sends (Claimed, from fan-out or a claimed
// row), what came of it (Outcome, which record writes), and where it stands. An item passes
// from step to step: fan-out or claim make it, send attempts it, record writes it; each
// field's comment says which step sets it.
import type { Tracer } from "effect"
import type { Entry } from "./partitions.ts"

export type Claimed = {
  readonly id: string
  readonly eventId: string
  readonly attempts: number
  readonly manual: boolean
  readonly event: string
  readonly endpointId: string | null
  readonly subscriptionId: string | null
  readonly keyId: string | null
  readonly url: string
  readonly secret: Buffer
  /** The endpoint's previous secret while its overlap lasts: it signs too (docs/events.md#secret-rotation). */
  readonly previousSecret: Buffer | null
  readonly origin: string
  readonly eventCreatedAt: string
  readonly payload: string
  /** The event's company: send slots are shared fairly between companies. */
  readonly companyId: string
  /** The destination's deliveries per second at most (all engine processes together); null: none. */
  readonly rateLimit: number | null
  /** '<resource>:<record id>' when the destination orders deliveries by record; null otherwise. */
  readonly orderingKey: string | null
}

export type Outcome = {
  readonly id: string
  /** attempts before this one: the lease is only honoured if nobody moved it meanwhile. */
  readonly before: number
  readonly state: "pending" | "succeeded" | "failed"
  readonly nextAt: Date | null
  readonly startedAt: Date
  readonly durationMs: number
  readonly status: number | null
  readonly error: string | null
  readonly errorKind: string | null
  readonly snippet: string
  readonly endpointId: string | null
  readonly subscriptionId: string | null
  /** For endpoint health: a success resets the count, a delivery that failed every attempt adds one. */
  readonly health: "reset" | "fail" | null
  /** The subscription's receiver answered 410 Gone. */
  readonly gone: boolean
  /** The delivery's record key when its destination orders by record: a finished one lets the next go. */
  readonly orderingKey: string | null
  /**
   * For its destination's alerts (docs/events.md#failure-alerts): "ok" a success, "fail" a delivery
   * that failed every attempt; null otherwise, and for an alert's own delivery.
   */
  readonly alert: "ok" | "fail" | null
}

/** A delivery in memory. From fan-out it has no row until its outcome (or a hand-back) is written. */
export type Item = {
  readonly c: Claimed
  /** Fan-out's: the event, for the row and the cursor. Null for a claimed row. */
  readonly src: { readonly eventId: string; readonly companyId: string; readonly entry: Entry } | null
  /** A row exists, leased to this process until leaseUntil (the engine's clock): set by claim, or by record when it writes one. */
  persisted: boolean
  leaseUntil: number
  /** Real time (Date.now) it came into memory. */
  readonly fannedAt: number
  /** Send moves it from queued to sending to done; a hand-back or a drop ends it as done too. */
  state: "queued" | "sending" | "done"
  /** Set by send when an attempt ends. */
  outcome: Outcome | null
  /** Sent while its destination's circuit is open, as the single probe (send sets it). */
  probe: boolean
  /** Give it back unattempted: a row due at once (or at `dueAtMs`), for whoever claims it. */
  handBack: boolean
  /** When a row given back for lack of room here falls due (the engine's clock); null: at once. */
  dueAtMs: number | null
  /** Write it as a leased row now (it waited too long): set by the overdue sweep. */
  persist: boolean
  /** Gone from this process (written, or its partition was lost): nothing more is written for it. */
  dropped: boolean
  /** The fan-out round's span (tracing on): the first attempt's span goes under it. */
  readonly span: Tracer.AnySpan | null
}
