// NEVER data must not leave the shapers even if it reaches them by mistake: every row a
// shaper sees (the record, its children, its equipment and job site) also carries every
// NEVER column of every app table, filled with a marker.
import { describe, expect, it } from "vitest"
import { camelCase } from "../../src/domain/records/fields.ts"
import { NEVER_COLUMNS, shape } from "../../src/domain/records/index.ts"
import type { Row, ShapeInput } from "../../src/domain/records/types.ts"
import { RESOURCES } from "../../src/domain/resources.ts"
import { FIXTURES } from "./fixtures.ts"

const NEVER = [...new Set(Object.values(NEVER_COLUMNS).flat())]
const marker = (column: string) => `NEVER-marker-${column}`
const polluted = (row: Row): Row => ({ ...row, ...Object.fromEntries(NEVER.map((c) => [c, marker(c)])) })

const pollute = (input: ShapeInput): ShapeInput => ({
  ...input,
  row: polluted(input.row),
  children: input.children.map(polluted),
  equipment: input.equipment === null ? null : polluted(input.equipment),
  equipmentJobSite: input.equipmentJobSite === null ? null : polluted(input.equipmentJobSite)
})

describe("NEVER columns", () => {
  it("the list is not empty (guards the test below against vacuity)", () => {
    expect(NEVER).toEqual(
      expect.arrayContaining(["qr_code", "phone", "email", "medical_notes", "work_restrictions", "photos", "signature"])
    )
  })

  it.each(RESOURCES)("%s: no marker, no NEVER column name, anywhere in the JSON", (resource) => {
    const input = pollute(FIXTURES[resource])
    const json = JSON.stringify(shape(resource, input))
    expect(json).not.toContain("NEVER-marker")
    for (const column of NEVER) {
      expect(json).not.toContain(camelCase(column))
      expect(json).not.toContain(column)
    }
    // and the polluted input gives the same record as the clean one
    expect(shape(resource, input)).toStrictEqual(shape(resource, FIXTURES[resource]))
  })

  it("the markers really were in the input", () => {
    const input = pollute(FIXTURES.inspections)
    expect(JSON.stringify(input)).toContain(marker("medical_notes"))
    expect(input.children.length).toBeGreaterThan(0)
    expect(input.equipment).not.toBeNull()
  })
})
