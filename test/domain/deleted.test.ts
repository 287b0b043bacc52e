// A deleted record's stored copies keep its identifiers only: per resource, which fields stay,
// every other one null with its key in place (nested lists and objects too), and nothing else.
import { describe, expect, it } from "vitest"
import { IDENTIFIER_FIELDS, scrubToIdentifiers } from "../../src/domain/records/deleted.ts"
import { shape } from "../../src/domain/records/index.ts"
import { RESOURCES, type Resource } from "../../src/domain/resources.ts"
import { COMPANY, FIXTURES } from "./fixtures.ts"

const KEPT: ReadonlyArray<readonly [Resource, ReadonlyArray<string>]> = [
  ["incidents", ["id", "companyId", "reference"]],
  ["observations", ["id", "companyId"]],
  ["corrective-actions", ["id"]],
  ["audits", ["id", "companyId"]],
  ["inspections", ["id"]],
  ["training-records", ["id", "companyId"]],
  ["workers", ["id", "companyId"]],
  ["job-sites", ["id", "companyId"]],
  ["changes", ["id", "companyId"]],
  ["permits", ["id", "companyId"]],
  ["policies", ["id", "companyId"]],
  ["sds", ["id", "companyId"]],
  ["risk-assessments", ["id", "companyId"]],
  ["subcontractors", ["id", "companyId"]]
]

describe("scrubToIdentifiers", () => {
  it("names every resource", () => {
    expect(KEPT.map(([r]) => r).sort()).toEqual([...RESOURCES].sort())
  })

  it.each(KEPT)("%s keeps %j; every other field is null, its key in place", (resource, kept) => {
    const record = shape(resource, FIXTURES[resource])
    const json = JSON.stringify(record)
    const scrubbed = JSON.parse(scrubToIdentifiers(resource, json)) as Record<string, unknown>
    expect(Object.keys(scrubbed)).toEqual(Object.keys(record))
    expect(IDENTIFIER_FIELDS[resource]).toEqual(kept)
    for (const [field, value] of Object.entries(scrubbed)) {
      if (kept.includes(field)) expect(value, field).toEqual(record[field])
      else expect(value, field).toBeNull()
    }
    // The fixture's values are really there to lose: more than the identifiers were set.
    expect(Object.values(record).filter((v) => v !== null).length).toBeGreaterThan(kept.length)
    if (kept.includes("companyId")) expect(scrubbed.companyId).toBe(COMPANY)
  })

  it("gives back the same text when there is nothing left to scrub, or no record object", () => {
    const once = scrubToIdentifiers("audits", JSON.stringify(shape("audits", FIXTURES.audits)))
    expect(scrubToIdentifiers("audits", once)).toBe(once)
    for (const text of ["[1,2]", "null", '"text"', "42"]) expect(scrubToIdentifiers("incidents", text)).toBe(text)
  })
})
