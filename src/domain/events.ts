// Which events one row's net change in one transaction fires (app-database.md, "When each
// event fires"). before: the row before the transaction (null if it did not exist);
// after: the row at commit (null if deleted). Comparing only these two states is what makes
// a row changed twice in one transaction fire at most once per event.
import { EVENT_KINDS, type EventKind } from "./event-kinds.ts"
import type { Row } from "./records/types.ts"

const CLOSED = new Set(["completed", "verified"])

/** The column's value entered `value` (by insert or update) rather than staying at it. */
const becomes = (before: Row | null, after: Row, column: string, value: string): boolean =>
  after[column] === value && (before === null || before[column] !== value)

type Rule = (before: Row | null, after: Row) => ReadonlyArray<EventKind>

const inserted =
  (kind: EventKind): Rule =>
  (before) =>
    before === null ? [kind] : []

const becomesValue =
  (column: string, value: string, kind: EventKind): Rule =>
  (before, after) =>
    becomes(before, after, column, value) ? [kind] : []

const all =
  (...rules: ReadonlyArray<Rule>): Rule =>
  (before, after) =>
    rules.flatMap((rule) => rule(before, after))

// Keyed by app table name; tables not listed (children, equipment, settings) fire nothing.
const RULES: Readonly<Record<string, Rule>> = {
  incidents: inserted("incident.created"),
  observations: inserted("observation.created"),
  corrective_actions: all(inserted("corrective_action.created"), (before, after) =>
    // entering the closed group from outside it: completed -> verified stays inside, so nothing
    CLOSED.has(String(after["status"])) && (before === null || !CLOSED.has(String(before["status"])))
      ? ["corrective_action.closed"]
      : []
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
  if (rule === undefined || after === null) return []
  return [...new Set(rule(before, after))].sort((a, b) => rank(a) - rank(b))
}
