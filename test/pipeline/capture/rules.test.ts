// The one rule capture applies to a record at a commit point (src/pipeline/capture/step/rules.ts),
// as a table: its row before and now, whether it was held, whether something holds it, whether
// it can be shaped; what becomes of it.
import { describe, expect, it } from "vitest"
import { filled, type RecordAt, scrubsPrivacy, verdict } from "../../../src/pipeline/capture/step/rules.ts"

const action = (status: string, extra: Record<string, unknown> = {}) => ({ id: "a", status, title: "T", ...extra })
const at = (over: Partial<RecordAt>): RecordAt => ({
  table: "corrective_actions",
  before: null,
  now: action("open"),
  owed: undefined,
  blocked: false,
  ...over
})

describe("the one rule: a record at a commit point", () => {
  const cases: ReadonlyArray<[string, RecordAt, boolean, ReturnType<typeof verdict>]> = [
    [
      "inserted: it is shown and fires created",
      at({}),
      true,
      { kind: "shown", events: ["corrective_action.created"], released: false }
    ],
    [
      "inserted closed: created, then closed",
      at({ now: action("completed") }),
      true,
      { kind: "shown", events: ["corrective_action.created", "corrective_action.closed"], released: false }
    ],
    [
      "updated into the closed group",
      at({ before: action("open"), now: action("verified") }),
      true,
      { kind: "shown", events: ["corrective_action.closed"], released: false }
    ],
    [
      "updated within the group: nothing fires",
      at({ before: action("completed"), now: action("verified") }),
      true,
      { kind: "shown", events: [], released: false }
    ],
    [
      "deleted: gone, whatever else holds",
      at({ before: action("open"), now: null, blocked: true }),
      false,
      { kind: "gone" }
    ],
    ["deleted while held: gone, owing nothing", at({ now: null, owed: null }), true, { kind: "gone" }],
    [
      "cannot be shaped: held, owing from its row before",
      at({ before: action("open"), now: action("completed") }),
      false,
      { kind: "held", owes: action("open") }
    ],
    ["inserted and cannot be shaped: held, owing its creation", at({}), false, { kind: "held", owes: null }],
    [
      "held already and still cannot be: owes what it owed",
      at({ before: action("open"), owed: action("in_progress") }),
      false,
      { kind: "held", owes: undefined }
    ],
    [
      "blocked (its table does not fit), even if it could be shaped",
      at({ before: action("open"), now: action("completed"), blocked: true }),
      true,
      { kind: "held", owes: action("open") }
    ],
    [
      "held since its creation, shaped again closed: released with created and closed",
      at({ before: action("open"), now: action("completed"), owed: null }),
      true,
      { kind: "shown", events: ["corrective_action.created", "corrective_action.closed"], released: true }
    ],
    [
      "held open, closed and reopened while held: its changes count as one, nothing fires",
      at({ before: action("completed"), now: action("open"), owed: action("open") }),
      true,
      { kind: "shown", events: [], released: true }
    ],
    [
      "only a child row changed (before is now): nothing fires",
      at({ before: action("completed"), now: action("completed") }),
      true,
      { kind: "shown", events: [], released: false }
    ],
    [
      "a starting point (first start, rebuild): nothing fires",
      at({ before: action("completed"), now: action("completed"), baseline: true }),
      true,
      { kind: "shown", events: [], released: false }
    ],
    [
      "a starting point that cannot be shaped: held, owing nothing",
      at({ before: action("completed"), now: action("completed"), baseline: true }),
      false,
      { kind: "held", owes: action("completed") }
    ]
  ]
  for (const [name, input, shapes, expected] of cases) {
    it(name, () => {
      let asked = false
      const v = verdict(input, () => {
        asked = true
        return shapes
      })
      expect(v).toEqual(expected)
      // A deleted or blocked record is never shaped.
      if (input.now === null || input.blocked) expect(asked).toBe(false)
    })
  }

  it("a value the row before lacks (a column the service could not read then) counts as unchanged", () => {
    const now = { id: "i", outcome: "fail", checklist: "C" }
    expect(filled({ id: "i", checklist: "C" }, now)).toEqual(now)
    expect(filled({ id: "i", outcome: "pass" }, now)).toEqual({ id: "i", outcome: "pass", checklist: "C" })
    expect(filled(null, now)).toBeNull()
    const whole = { id: "i", outcome: "pass", checklist: "C" }
    expect(filled(whole, now)).toBe(whole)
    // An inspection read without its outcome at a first start fires nothing when it is read whole.
    expect(verdict(at({ table: "inspections", before: { id: "i", checklist: "C" }, now }), () => true)).toEqual({
      kind: "shown",
      events: [],
      released: false
    })
  })

  it("a privacy case's stored events lose its fields when it becomes one, while held, and at a starting point", () => {
    const incident = (privacy: boolean) => ({ id: "n", privacy_case: privacy, person_name: null })
    const of = (over: Partial<RecordAt>) => at({ table: "incidents", now: incident(true), ...over })
    expect(scrubsPrivacy(of({ before: incident(false) }))).toBe(true)
    expect(scrubsPrivacy(of({ before: null }))).toBe(true)
    expect(scrubsPrivacy(of({ before: incident(true) }))).toBe(false)
    expect(scrubsPrivacy(of({ before: incident(true), owed: incident(false) }))).toBe(true)
    expect(scrubsPrivacy(of({ before: incident(true), baseline: true }))).toBe(true)
    expect(scrubsPrivacy(of({ before: incident(true), now: incident(false) }))).toBe(false)
    expect(scrubsPrivacy(at({ now: action("open", { privacy_case: true }) }))).toBe(false)
  })
})
