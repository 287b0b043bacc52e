// A delivery in memory: what an attempt sends (Claimed, from fan-out or a claimed row) and
// what came of it (Outcome, which record writes).

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
  /** The endpoint's previous secret while its overlap lasts: it signs too (issue 15.5). */
  readonly previousSecret: Buffer | null
  readonly origin: string
  readonly eventCreatedAt: string
  readonly payload: string
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
}
