// Every rule of docs/events.md#event-kinds, as net transitions of one row.
import { describe, expect, it } from "vitest"
import { eventsFor } from "../../src/domain/events.ts"
import type { Row } from "../../src/domain/records/types.ts"

const row = (fields: Record<string, unknown> = {}): Row => ({ id: "r1", company_id: "c1", ...fields })

interface Case {
  readonly name: string
  readonly table: string
  readonly before: Row | null
  readonly after: Row | null
  readonly expected: ReadonlyArray<string>
}

const ca = (status: string) => row({ status, title: "Fit guardrail" })
const insp = (outcome: string) => row({ outcome })
const change = (status: string) => row({ status })
const permit = (status: string) => row({ status })

const CASES: ReadonlyArray<Case> = [
  // created events: insert only
  { name: "incident inserted", table: "incidents", before: null, after: row(), expected: ["incident.created"] },
  {
    name: "incident updated",
    table: "incidents",
    before: row({ status: "open" }),
    after: row({ status: "closed" }),
    expected: []
  },
  { name: "incident deleted", table: "incidents", before: row(), after: null, expected: [] },
  {
    name: "observation inserted",
    table: "observations",
    before: null,
    after: row(),
    expected: ["observation.created"]
  },
  {
    name: "observation updated",
    table: "observations",
    before: row({ status: "open" }),
    after: row({ status: "closed" }),
    expected: []
  },
  { name: "audit inserted", table: "audits", before: null, after: row({ score: 80 }), expected: ["audit.created"] },
  { name: "audit rescored", table: "audits", before: row({ score: null }), after: row({ score: 80 }), expected: [] },
  {
    name: "training record inserted",
    table: "training_records",
    before: null,
    after: row(),
    expected: ["training_record.created"]
  },
  {
    name: "training record updated",
    table: "training_records",
    before: row(),
    after: row({ provider: "x" }),
    expected: []
  },

  // corrective actions: created, and closed on entering {completed, verified}
  {
    name: "CA inserted open",
    table: "corrective_actions",
    before: null,
    after: ca("open"),
    expected: ["corrective_action.created"]
  },
  {
    name: "CA inserted in_progress",
    table: "corrective_actions",
    before: null,
    after: ca("in_progress"),
    expected: ["corrective_action.created"]
  },
  {
    name: "CA inserted completed: created then closed",
    table: "corrective_actions",
    before: null,
    after: ca("completed"),
    expected: ["corrective_action.created", "corrective_action.closed"]
  },
  {
    name: "CA inserted verified: created then closed",
    table: "corrective_actions",
    before: null,
    after: ca("verified"),
    expected: ["corrective_action.created", "corrective_action.closed"]
  },
  {
    name: "CA open -> in_progress",
    table: "corrective_actions",
    before: ca("open"),
    after: ca("in_progress"),
    expected: []
  },
  {
    name: "CA open -> completed",
    table: "corrective_actions",
    before: ca("open"),
    after: ca("completed"),
    expected: ["corrective_action.closed"]
  },
  {
    name: "CA in_progress -> completed",
    table: "corrective_actions",
    before: ca("in_progress"),
    after: ca("completed"),
    expected: ["corrective_action.closed"]
  },
  {
    name: "CA open -> verified",
    table: "corrective_actions",
    before: ca("open"),
    after: ca("verified"),
    expected: ["corrective_action.closed"]
  },
  {
    name: "CA completed -> verified",
    table: "corrective_actions",
    before: ca("completed"),
    after: ca("verified"),
    expected: []
  },
  {
    name: "CA verified -> completed",
    table: "corrective_actions",
    before: ca("verified"),
    after: ca("completed"),
    expected: []
  },
  {
    name: "CA completed, other column edited",
    table: "corrective_actions",
    before: ca("completed"),
    after: { ...ca("completed"), close_out_notes: "done" },
    expected: []
  },
  {
    name: "CA reopened (completed -> open)",
    table: "corrective_actions",
    before: ca("completed"),
    after: ca("open"),
    expected: []
  },
  // a reopened action that closes again fires again: its net transition is open -> completed
  {
    name: "CA reopened then closed again",
    table: "corrective_actions",
    before: ca("open"),
    after: ca("completed"),
    expected: ["corrective_action.closed"]
  },
  // net change across one transaction: completed -> open -> completed is no change
  {
    name: "CA completed -> (open) -> completed in one transaction",
    table: "corrective_actions",
    before: ca("completed"),
    after: ca("completed"),
    expected: []
  },
  {
    name: "CA deleted while completed",
    table: "corrective_actions",
    before: ca("completed"),
    after: null,
    expected: []
  },

  // inspections: outcome becomes fail
  {
    name: "inspection inserted fail",
    table: "inspections",
    before: null,
    after: insp("fail"),
    expected: ["inspection.failed"]
  },
  { name: "inspection inserted pass", table: "inspections", before: null, after: insp("pass"), expected: [] },
  {
    name: "inspection inserted needs_attention",
    table: "inspections",
    before: null,
    after: insp("needs_attention"),
    expected: []
  },
  {
    name: "inspection pass -> fail",
    table: "inspections",
    before: insp("pass"),
    after: insp("fail"),
    expected: ["inspection.failed"]
  },
  {
    name: "inspection needs_attention -> fail",
    table: "inspections",
    before: insp("needs_attention"),
    after: insp("fail"),
    expected: ["inspection.failed"]
  },
  {
    name: "inspection fail -> fail (notes edited)",
    table: "inspections",
    before: insp("fail"),
    after: { ...insp("fail"), notes: "x" },
    expected: []
  },
  { name: "inspection fail -> pass", table: "inspections", before: insp("fail"), after: insp("pass"), expected: [] },
  { name: "inspection deleted", table: "inspections", before: insp("pass"), after: null, expected: [] },

  // changes: status becomes approved / implemented
  { name: "change inserted draft", table: "changes", before: null, after: change("draft"), expected: [] },
  {
    name: "change inserted approved",
    table: "changes",
    before: null,
    after: change("approved"),
    expected: ["change.approved"]
  },
  {
    name: "change inserted implemented",
    table: "changes",
    before: null,
    after: change("implemented"),
    expected: ["change.implemented"]
  },
  {
    name: "change submitted -> approved",
    table: "changes",
    before: change("submitted"),
    after: change("approved"),
    expected: ["change.approved"]
  },
  {
    name: "change approved -> approved",
    table: "changes",
    before: change("approved"),
    after: { ...change("approved"), title: "t" },
    expected: []
  },
  {
    name: "change approved -> implemented",
    table: "changes",
    before: change("approved"),
    after: change("implemented"),
    expected: ["change.implemented"]
  },
  {
    name: "change submitted -> implemented (skipping approved)",
    table: "changes",
    before: change("submitted"),
    after: change("implemented"),
    expected: ["change.implemented"]
  },
  {
    name: "change implemented -> closed",
    table: "changes",
    before: change("implemented"),
    after: change("closed"),
    expected: []
  },
  {
    name: "change submitted -> rejected",
    table: "changes",
    before: change("submitted"),
    after: change("rejected"),
    expected: []
  },
  {
    name: "change rejected -> approved",
    table: "changes",
    before: change("rejected"),
    after: change("approved"),
    expected: ["change.approved"]
  },

  // permits: status becomes approved / closed
  { name: "permit inserted requested", table: "permits", before: null, after: permit("requested"), expected: [] },
  {
    name: "permit inserted approved",
    table: "permits",
    before: null,
    after: permit("approved"),
    expected: ["permit.approved"]
  },
  {
    name: "permit inserted closed",
    table: "permits",
    before: null,
    after: permit("closed"),
    expected: ["permit.closed"]
  },
  {
    name: "permit requested -> approved",
    table: "permits",
    before: permit("requested"),
    after: permit("approved"),
    expected: ["permit.approved"]
  },
  {
    name: "permit approved -> active",
    table: "permits",
    before: permit("approved"),
    after: permit("active"),
    expected: []
  },
  {
    name: "permit active -> closed",
    table: "permits",
    before: permit("active"),
    after: permit("closed"),
    expected: ["permit.closed"]
  },
  {
    name: "permit closed -> closed",
    table: "permits",
    before: permit("closed"),
    after: { ...permit("closed"), location: "x" },
    expected: []
  },
  {
    name: "permit requested -> cancelled",
    table: "permits",
    before: permit("requested"),
    after: permit("cancelled"),
    expected: []
  },
  { name: "permit approved deleted", table: "permits", before: permit("approved"), after: null, expected: [] },

  // tables without events
  ...[
    "companies",
    "company_modules",
    "users",
    "workers",
    "job_sites",
    "equipment",
    "audit_items",
    "inspection_items",
    "policies",
    "policy_acknowledgements",
    "sds",
    "risk_assessments",
    "subcontractors",
    "subcontractor_documents",
    "service_keys",
    "app.incidents",
    "toString",
    "__proto__"
  ].map((table) => ({
    name: `${table} inserted`,
    table,
    before: null,
    after: row({ status: "approved", outcome: "fail" }),
    expected: []
  }))
]

describe("eventsFor", () => {
  it.each(CASES)("$name ($table)", ({ table, before, after, expected }) => {
    expect(eventsFor(table, before, after)).toEqual(expected)
  })

  it("is deterministic: the same transition gives the same list every time", () => {
    const results = Array.from({ length: 5 }, () => eventsFor("corrective_actions", null, ca("verified")))
    for (const r of results) expect(r).toEqual(["corrective_action.created", "corrective_action.closed"])
  })
})
