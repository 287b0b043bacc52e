// The one rule every route of capture applies to a record at a commit point (a stream's
// transaction, a large transaction's commit, a first start, a re-read, a held record shaped
// again, rebuild-views): from its row before and its row now, whether its view goes, waits or
// is written, which events fire, and whether its stored events lose a privacy case's fields.
// docs/events.md#how-events-are-derived and docs/privacy.md state the rules; this is them, once.
// Pure: the routes load the rows, shape the record and write what this decides.
import type { EventKind } from "../../../domain/event-kinds.ts"
import { eventsFor } from "../../../domain/events.ts"
import type { Row } from "../../../domain/records/types.ts"

/** A record at a commit point, as a route found it. */
export interface RecordAt {
  readonly table: string
  /**
   * Its row as the rules compare it: before this point when its own row changed here; its row
   * now when only something it shows changed (a child row), or for a starting point (a first
   * start, a lost slot's rebuild, rebuild-views), where nothing fires.
   */
  readonly before: Row | null
  /** Its row now; null: gone (deleted, truncated, or never there). */
  readonly now: Row | null
  /** Held before this point: what it owes (its row before it was held; null: it had none). Undefined: not held. */
  readonly owed: Row | null | undefined
  /** Something holds it whatever its data: its table does not fit (or is being read again), or a value of it could not be read. */
  readonly blocked: boolean
  /** A starting point (its `before` is its row now, so nothing fires): stored events of a privacy case lose its fields. */
  readonly baseline?: boolean
}

export type Verdict =
  /** Its view goes, with a tombstone; every stored event about it keeps only its identifiers; released if held, owing nothing. */
  | { readonly kind: "gone" }
  /** Its view stays as it was (redacted, should it be a privacy case now); `owes`: its row before it was held (undefined: held already, owing what it owed). */
  | { readonly kind: "held"; readonly owes: Row | null | undefined }
  /** Its view is written; these events fire with it as their payload; `released`: it was held. */
  | { readonly kind: "shown"; readonly events: ReadonlyArray<EventKind>; readonly released: boolean }

const GONE: Verdict = { kind: "gone" }

/**
 * A value the row before lacks (a column the service could not read then: renamed out of shape
 * at a first start, or a row stored before the column was published) counts as unchanged.
 */
export const filled = (before: Row | null, now: Row): Row | null => {
  if (before === null) return null
  let missing = false
  for (const c in now) {
    if (!(c in before)) {
      missing = true
      break
    }
  }
  if (!missing) return before
  return { ...now, ...before }
}

/**
 * What happens to the record. `shapes` tells whether it can be shaped now (asked only when it
 * matters): one that cannot is held; one held that can is released, owing the events of its
 * row before it was held against its row now (its changes while held count as one).
 */
export const verdict = (at: RecordAt, shapes: () => boolean): Verdict => {
  if (at.now === null) return GONE
  if (at.blocked || !shapes()) return { kind: "held", owes: at.owed !== undefined ? undefined : at.before }
  const from = at.owed !== undefined ? at.owed : at.before
  return { kind: "shown", events: eventsFor(at.table, filled(from, at.now), at.now), released: at.owed !== undefined }
}

/**
 * Whether the stored events of an incident must lose a privacy case's fields now: it is one, and
 * events stored about it may still carry them (it was not one before, it is held, or this is a
 * starting point after events were derived without the service, as after a lost slot). Events
 * of the same point are shaped withheld already; those written before it are not.
 */
export const scrubsPrivacy = (at: RecordAt): boolean =>
  at.table === "incidents" &&
  at.now?.privacy_case === true &&
  (at.baseline === true || at.owed !== undefined || at.before?.privacy_case !== true)
