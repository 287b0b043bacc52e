// Replays as the admin API and the admin pages ask for them (the CLI's `replay` calls the
// same operations/replay.ts): checked input, a dry run's plan or a stored replay, cancel, and
// the one log line each (`replay started`, `replay cancelled`; the lane logs `replay finished`).
import { Effect } from "effect"
import { FILTER_DATE_FORMATS, parseFilterDate } from "../../domain/dates.ts"
import type { Sql } from "../../platform/db/Sql.ts"
import { ReplayRate } from "./lane.ts"
import { replay, type ReplaySource, type ReplaySummary } from "./select.ts"
import { cancelReplay, getReplay, listReplays, type ReplayView } from "./jobs.ts"
import type { Actor } from "../../access/activity.ts"
import { at, invalid, words, type DomainError } from "../../domain/errors.ts"
import { checked } from "../endpoints/validate.ts"

export interface ReplayRequest {
  readonly endpointId?: string | undefined
  readonly subscriptionId?: string | undefined
  /** A filter date (FILTER_DATE_FORMATS); default: when the destination was made. */
  readonly since?: string | undefined
  /** Exclusive; default: now. */
  readonly until?: string | undefined
  readonly events?: ReadonlyArray<string> | undefined
  readonly failedOnly?: boolean | undefined
  readonly dryRun?: boolean | undefined
}

/** What a replay would send (a dry run), or did not make because there is nothing to send. */
export interface ReplayPlan {
  readonly dryRun: boolean
  readonly destination: {
    readonly kind: "endpoint" | "subscription"
    readonly id: string
    readonly url: string
    readonly on: boolean
  }
  readonly since: string
  readonly until: string
  readonly events: ReadonlyArray<string>
  readonly failedOnly: boolean
  readonly matched: number
  /** Existing deliveries sent again with their own id. */
  readonly resend: number
  /** New deliveries: events the destination never had one for. */
  readonly create: number
  /** resend + create: what would be sent. */
  readonly deliveries: number
  readonly skippedDelivered: number
  readonly skippedInFlight: number
  /** REPLAY_RATE: deliveries per second to this destination. */
  readonly rate: number
  /** deliveries / rate, rounded up. */
  readonly estimatedSeconds: number
}

export type ReplayStarted = { readonly plan: ReplayPlan } | { readonly replay: ReplayView }

export const planOf = (s: ReplaySummary, rate: number): ReplayPlan => {
  const deliveries = s.resent + s.created
  return {
    dryRun: s.dryRun,
    destination: { kind: s.destination.kind, id: s.destination.id, url: s.destination.url, on: s.destination.on },
    since: s.since,
    until: s.until,
    events: s.events,
    failedOnly: s.failedOnly,
    matched: s.matched,
    resend: s.resent,
    create: s.created,
    deliveries,
    skippedDelivered: s.skippedDelivered,
    skippedInFlight: s.skippedInFlight,
    rate,
    estimatedSeconds: Math.ceil(deliveries / rate)
  }
}

const dateOf = (name: string, text: string | undefined): Date | undefined => {
  if (text === undefined || text.trim() === "") return undefined
  const d = parseFilterDate(text.trim())
  if (d === undefined)
    throw invalid(words`${at(name)} must be ${FILTER_DATE_FORMATS}, not ${JSON.stringify(text.slice(0, 60))}`)
  return new Date(d.epochMillis)
}

/** A dry run (`dryRun`), or a replay made and logged; always of the admin's own company. */
export const startReplay = (
  actor: Actor,
  companyId: string,
  source: Exclude<ReplaySource, "cli">,
  request: ReplayRequest
): Effect.Effect<ReplayStarted, DomainError, Sql> =>
  Effect.gen(function* () {
    const rate = yield* ReplayRate
    const since = yield* checked(() => dateOf("since", request.since))
    const until = yield* checked(() => dateOf("until", request.until))
    const summary = yield* replay({
      endpointId: request.endpointId,
      subscriptionId: request.subscriptionId,
      since,
      until,
      events: request.events,
      failedOnly: request.failedOnly ?? false,
      dryRun: request.dryRun ?? false,
      actor,
      companyId,
      source
    })
    const result: ReplayStarted =
      summary.replayId === null
        ? { plan: planOf(summary, rate) }
        : { replay: yield* getReplay({ id: summary.replayId }) }
    if ("replay" in result) {
      const r = result.replay
      yield* Effect.logInfo("replay started", {
        replayId: r.id,
        companyId: r.companyId,
        destination: { kind: r.destination.kind, id: r.destination.id },
        queued: r.progress.queued,
        since: r.since,
        until: r.until,
        events: r.events,
        failedOnly: r.failedOnly,
        source,
        by: actor.kind === "user" ? actor.email : null
      })
    }
    return result
  })

export const showReplay = (companyId: string, id: string) => getReplay({ id, companyId })

export const replaysOf = (
  companyId: string,
  filter: { readonly endpointId?: string; readonly subscriptionId?: string; readonly limit?: number } = {}
) => listReplays({ companyId, ...filter })

export const stopReplay = (actor: Actor, companyId: string, id: string): Effect.Effect<ReplayView, DomainError, Sql> =>
  Effect.gen(function* () {
    const r = yield* cancelReplay(actor, { id, companyId })
    yield* Effect.logInfo("replay cancelled", {
      replayId: r.id,
      companyId: r.companyId,
      destination: { kind: r.destination.kind, id: r.destination.id },
      queued: r.progress.queued,
      sent: r.progress.sent,
      restored: r.progress.restored,
      notSent: r.progress.remaining,
      by: actor.kind === "user" ? actor.email : null
    })
    return r
  })
