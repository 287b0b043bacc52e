// The publication guard: NEVER columns, missing tables or columns, extra columns or tables,
// row filters and missing operations are each named as app.table[.column]. Pure.
import { describe, expect, it } from "vitest"
import { publicationProblems, type FoundPublication } from "../../../src/pipeline/capture/publication.ts"
import { PUBLISHED_COLUMNS } from "../../../src/domain/records/index.ts"

const exact = (): Map<string, { columns: ReadonlyArray<string>; rowFilter: string | null }> =>
  new Map(Object.entries(PUBLISHED_COLUMNS).map(([t, columns]) => [`app.${t}`, { columns, rowFilter: null }]))

const pub = (
  edit: (tables: ReturnType<typeof exact>) => void = () => {},
  extra: Partial<FoundPublication> = {}
): FoundPublication => {
  const tables = exact()
  edit(tables)
  return { allTables: false, publishes: { insert: true, update: true, delete: true, truncate: true }, tables, ...extra }
}

describe("publicationProblems", () => {
  it("finds nothing wrong with the publication setup-sql makes", () => {
    expect(publicationProblems("p", pub())).toEqual([])
  })

  it.each([
    [
      "a NEVER column",
      (t: ReturnType<typeof exact>) =>
        t.set("app.workers", { columns: [...PUBLISHED_COLUMNS.workers!, "phone"], rowFilter: null }),
      "app.workers.phone is published, and it is NEVER sent"
    ],
    [
      "an unknown column",
      (t: ReturnType<typeof exact>) =>
        t.set("app.sds", { columns: [...PUBLISHED_COLUMNS.sds!, "notes"], rowFilter: null }),
      "app.sds.notes is published, but the service does not read it"
    ],
    [
      "a missing table",
      (t: ReturnType<typeof exact>) => t.delete("app.permits"),
      "app.permits is not in publication p"
    ],
    [
      "a missing column",
      (t: ReturnType<typeof exact>) =>
        t.set("app.permits", { columns: PUBLISHED_COLUMNS.permits!.filter((c) => c !== "status"), rowFilter: null }),
      "app.permits.status is not published"
    ],
    [
      "a row filter",
      (t: ReturnType<typeof exact>) =>
        t.set("app.incidents", { columns: PUBLISHED_COLUMNS.incidents!, rowFilter: "(severity <> 'minor'::text)" }),
      "app.incidents is published with a row filter"
    ],
    [
      "another table",
      (t: ReturnType<typeof exact>) => t.set("public.payroll", { columns: ["id", "salary"], rowFilter: null }),
      "public.payroll is in publication p, but the service does not follow it"
    ]
  ])("names %s", (_, edit, message) => {
    const problems = publicationProblems("p", pub(edit))
    expect(problems).toHaveLength(1)
    expect(problems[0]).toContain(message)
  })

  it("names every operation a publication leaves out, and FOR ALL TABLES", () => {
    const problems = publicationProblems(
      "p",
      pub(undefined, { allTables: true, publishes: { insert: true, update: true, delete: false, truncate: false } })
    )
    expect(problems).toEqual([
      expect.stringContaining("FOR ALL TABLES"),
      expect.stringContaining("does not publish deletes"),
      expect.stringContaining("does not publish truncates")
    ])
  })
})
