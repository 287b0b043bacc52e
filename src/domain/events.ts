// Which events one row's net change in one transaction fires (docs/events.md#how-events-are-derived;
// each kind's rule under docs/events.md#event-kinds). before: the row before the transaction
// (null if it did not exist); after: the row at commit (null if deleted). Comparing only these two states is what makes
// a row changed twice in one transaction fire at most once per event.
import { EVENT_KINDS, type EventKind } from "./event-kinds.ts"
import type { Row } from "./records/types.ts"

const CLOSED = new Set(["completed", "verified"])
const CLOSED_EVENT: ReadonlyArray<EventKind> = ["corrective_action.closed"]

/** The column's value entered `value` (by insert or update) rather than staying at it. */
const becomes = (before: Row | null, after: Row, column: string, value: string): boolean =>
  after[column] === value && (before === null || before[column] !== value)

type Rule = (before: Row | null, after: Row) => ReadonlyArray<EventKind>

// Rules answer with shared arrays (read only): no allocation per change.
const NONE: ReadonlyArray<EventKind> = []

const inserted = (kind: EventKind): Rule => {
  const one: ReadonlyArray<EventKind> = [kind]
  return (before) => (before === null ? one : NONE)
}

const becomesValue = (column: string, value: string, kind: EventKind): Rule => {
  const one: ReadonlyArray<EventKind> = [kind]
  return (before, after) => (becomes(before, after, column, value) ? one : NONE)
}

const all =
  (...rules: ReadonlyArray<Rule>): Rule =>
  (before, after) => {
    let out = NONE
    for (const rule of rules) {
      const kinds = rule(before, after)
      if (kinds.length > 0) out = out.length === 0 ? kinds : [...out, ...kinds]
    }
    return out
  }

// Keyed by app table name; tables not listed (children, equipment, settings) fire nothing.
const RULES: Readonly<Record<string, Rule>> = {
  incidents: inserted("incident.created"),
  observations: inserted("observation.created"),
  corrective_actions: all(inserted("corrective_action.created"), (before, after) =>
    // entering the closed group from outside it: completed -> verified stays inside, so nothing
    CLOSED.has(String(after["status"])) && (before === null || !CLOSED.has(String(before["status"])))
      ? CLOSED_EVENT
      : NONE
  ),
  audits: inserted("audit.created"),
  inspections: becomesValue("outcome", "fail", "inspection.failed"),
  training_records: inserted("training_record.created"),
  changes: all(
    becomesValue("status", "approved", "change.approved"),
    becomesValue("status", "implemented", "change.implemented")
  ),
  permits: all(becomesValue("status", "approved", "permit.approved"), becomesValue("status", "closed", "permit.closed"))
}

const rank = (kind: EventKind): number => EVENT_KINDS.indexOf(kind)

/** The events, in EVENT_KINDS order (so created comes before closed). A delete fires nothing. */
export const eventsFor = (table: string, before: Row | null, after: Row | null): ReadonlyArray<EventKind> => {
  const rule = Object.hasOwn(RULES, table) ? RULES[table] : undefined
  if (rule === undefined || after === null) return NONE
  const kinds = rule(before, after)
  // Most changes fire one event or none: nothing to order (capture asks once per changed row).
  return kinds.length < 2 ? kinds : [...new Set(kinds)].sort((a, b) => rank(a) - rank(b))
}
