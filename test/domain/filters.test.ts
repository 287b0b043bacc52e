// Content filters (docs/events.md#content-filters): what is refused when a destination is
// saved, each with a message naming the problem, and how a filter reads an event's data.
import { describe, expect, it } from "vitest"
import { isDomainError } from "../../src/domain/errors.ts"
import { matches, parseFilter, type Filter } from "../../src/domain/filters/filter.ts"

const refusal = (input: unknown, events: Parameters<typeof parseFilter>[1] = ["incident.created"]): string => {
  try {
    parseFilter(input, events)
  } catch (e) {
    if (isDomainError(e)) return e.message
    throw e
  }
  throw new Error("expected the filter to be refused")
}

describe("checked when saved", () => {
  it("takes the issue's example, the three combinators and a plain value as $eq", () => {
    const f = {
      severity: { $in: ["serious", "critical"] },
      jobSiteId: "0190a1b2-0000-7000-8000-000000000001",
      $or: [{ oshaRecordable: true }, { type: { $ne: "near_miss" } }],
      $not: { status: "closed" },
      $and: [{ occurredAt: { $gte: "2026-01-01T00:00:00Z" } }, { reference: { $exists: true } }]
    }
    expect(parseFilter(f, ["incident.created"])).toEqual(f)
    expect(parseFilter(null, ["incident.created"])).toBeNull()
  })

  it.each([
    [{ personName: "Sam" }, 'filter: "personName" is withheld from privacy cases: a filter may not read it'],
    [
      { description: { $exists: true } },
      'filter: "description" is withheld from privacy cases: a filter may not read it'
    ],
    [{ photos: { $exists: true } }, 'filter: "photos" is never sent: a filter may not read it'],
    [{ workRestrictions: "x" }, 'filter: "workRestrictions" is never sent: a filter may not read it'],
    [{ severty: "serious" }, 'filter: unknown field "severty" of incident.created'],
    [
      { severity: { $regex: "ser" } },
      'filter: unknown operator "$regex" on "severity"; operators: $eq $ne $in $nin $gt $gte $lt $lte $exists'
    ],
    [{ $nor: [{ severity: "minor" }] }, 'filter: unknown operator "$nor"; combine filters with $and $or $not'],
    [{ severity: 3 }, 'filter: "severity" must be compared with a string'],
    [{ oshaRecordable: { $in: ["yes"] } }, 'filter: $in of "oshaRecordable" takes a boolean in its list'],
    [{ severity: { $in: [] } }, 'filter: $in of "severity" takes a list of 1 to 100 values'],
    [{ oshaRecordable: { $gt: true } }, 'filter: $gt cannot compare "oshaRecordable" (boolean)'],
    [{ severity: { $exists: 1 } }, 'filter: $exists of "severity" takes true or false'],
    [{ severity: {} }, 'filter: "severity" has no operator'],
    [["severity"], 'filter: must be a JSON object, e.g. {"severity": {"$in": ["serious", "critical"]}}'],
    ["serious", 'filter: must be a JSON object, e.g. {"severity": {"$in": ["serious", "critical"]}}']
  ])("%j is refused: %s", (input, message) => {
    expect(refusal(input)).toBe(message)
  })

  it("refuses more than 2 KB and deeper than 5 levels", () => {
    const big = { $or: Array.from({ length: 60 }, (_, i) => ({ reference: `INC-${String(i).padStart(20, "0")}` })) }
    expect(JSON.stringify(big).length).toBeGreaterThan(2048)
    expect(refusal(big)).toBe("filter: is longer than 2048 bytes")
    // Five levels is the most: {"$not": {"$not": {"$not": {"severity": {"$eq": "x"}}}}}.
    const five = { $not: { $not: { $not: { severity: { $eq: "minor" } } } } }
    expect(parseFilter(five, ["incident.created"])).toEqual(five)
    expect(refusal({ $not: five })).toBe("filter: is nested deeper than 5 levels")
  })

  it("a field must be one of the chosen events' data: an action's field is unknown to incidents", () => {
    expect(refusal({ priority: "high" })).toBe('filter: unknown field "priority" of incident.created')
    expect(parseFilter({ priority: "high" }, ["incident.created", "corrective_action.created"])).toEqual({
      priority: "high"
    })
  })

  it("an alert's data has its own fields", () => {
    expect(parseFilter({ "destination.kind": "endpoint" }, ["webhook.failing"])).toEqual({
      "destination.kind": "endpoint"
    })
    expect(refusal({ severity: "serious" }, ["webhook.failing"])).toBe(
      'filter: unknown field "severity" of webhook.failing'
    )
  })
})

describe("evaluated on the data as sent", () => {
  const incident = {
    id: "i1",
    severity: "serious",
    oshaRecordable: true,
    occurredAt: "2026-03-04T05:06:07.089Z",
    personName: null,
    equipment: { name: "Crane 4" },
    tags: ["a", "b"]
  }
  const ok = (f: Filter) => matches(f, incident)

  it("compares with each operator", () => {
    expect(ok({ severity: "serious" })).toBe(true)
    expect(ok({ severity: "minor" })).toBe(false)
    expect(ok({ severity: { $in: ["serious", "critical"] } })).toBe(true)
    expect(ok({ severity: { $nin: ["serious", "critical"] } })).toBe(false)
    expect(ok({ severity: { $ne: "minor" } })).toBe(true)
    expect(ok({ occurredAt: { $gte: "2026-03-04T00:00:00Z", $lt: "2026-03-05" } })).toBe(true)
    expect(ok({ occurredAt: { $gt: "2026-03-05" } })).toBe(false)
    expect(ok({ oshaRecordable: true })).toBe(true)
    expect(ok({ "equipment.name": "Crane 4" })).toBe(true)
    expect(ok({ tags: "b" })).toBe(true)
  })

  it("a null or absent field: $exists false, equal to null, unequal to a value", () => {
    expect(ok({ personName: null })).toBe(true)
    expect(ok({ missing: { $exists: false } })).toBe(true)
    expect(ok({ severity: { $exists: false } })).toBe(false)
    expect(ok({ personName: { $ne: "Sam" } })).toBe(true)
    expect(ok({ personName: "Sam" })).toBe(false)
  })

  it("$and, $or and $not combine; every key of an object must hold", () => {
    expect(ok({ $or: [{ severity: "minor" }, { oshaRecordable: true }] })).toBe(true)
    expect(ok({ $and: [{ severity: "serious" }, { oshaRecordable: false }] })).toBe(false)
    expect(ok({ $not: { severity: "minor" } })).toBe(true)
    expect(ok({ severity: "serious", oshaRecordable: false })).toBe(false)
  })
})
