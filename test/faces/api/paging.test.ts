// Keyset paging over thousands of records: each record exactly once, newest first, with
// ties on createdAt broken by id, also while new records keep arriving; and page N costs
// what page 1 costs (the plan is an index scan that starts at the cursor).
import { beforeAll, describe, expect, it } from "vitest"
import {
  createCompany,
  makeRecord,
  NEVER_MARK,
  seedRecords,
  storeRecords,
  type TestCompany
} from "../../support/views.ts"
import { SafetyRecordsClient } from "../../../client/src/index.ts"
import { checkedFetch, makeKey, type CheckedFetch } from "../../support/http.ts"
import { useReadApi } from "../../support/fixtures.ts"

describe("paging", () => {
  const { db, server, checker, api } = useReadApi()
  let company: TestCompany
  let key: string
  // The typed client (client/), every answer checked against the document like api's.
  let checked: CheckedFetch
  let client: SafetyRecordsClient

  beforeAll(async () => {
    company = await createCompany(db.sql)
    key = (await makeKey(db, company)).key
    checked = checkedFetch(checker, NEVER_MARK)
    client = new SafetyRecordsClient({ baseUrl: server.url, apiKey: key, fetch: checked.fetch })
  })

  /** Every record of a list through the client's listPage, page by page; `between` runs after each page. */
  const pageThrough = async (
    resource: "training-records" | "sds" | "changes",
    params: { readonly createdAfter?: string },
    limit: number,
    between?: (page: number) => Promise<void>
  ) => {
    const seen: Array<{ id: string; createdAt: string }> = []
    let cursor: string | null = null
    let pages = 0
    do {
      const page: { data: ReadonlyArray<{ id: string; createdAt: string }>; nextCursor: string | null } =
        await client.listPage(resource, {
          ...params,
          limit,
          ...(cursor === null ? {} : { cursor })
        })
      expect(page.data.length).toBeLessThanOrEqual(limit)
      seen.push(...page.data.map((r) => ({ id: r.id, createdAt: r.createdAt })))
      cursor = page.nextCursor
      pages++
      if (between) await between(pages)
    } while (cursor !== null)
    return { seen, pages }
  }

  it("collects 3,000 records exactly once, newest first", async () => {
    const stored = await seedRecords(db.sql, "training-records", company.id, 3000, {
      newest: new Date("2026-06-01T00:00:00Z"),
      stepMillis: 7_000
    })
    const { seen, pages } = await pageThrough("training-records", {}, 200)
    expect(pages).toBe(15)
    expect(seen.map((r) => r.id)).toEqual(stored.map((s) => s.id))
    // The client's list follows nextCursor by itself.
    const from = checked.answers.length
    const ids: Array<string> = []
    for await (const r of client.list("training-records", { limit: 37 })) ids.push(r.id)
    expect(ids).toEqual(stored.map((s) => s.id))
    expect(checked.answers.length - from).toBe(Math.ceil(3000 / 37))
  })

  it("breaks ties on createdAt by id, across page boundaries", async () => {
    // 500 records sharing five timestamps
    const records = Array.from({ length: 500 }, (_, i) =>
      makeRecord("sds", { companyId: company.id, createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, i % 5)).toISOString() })
    )
    await storeRecords(db.sql, "sds", records, company.id)
    const expected = records
      .map((r) => ({ id: String(r["id"]), createdAt: String(r["createdAt"]) }))
      .sort((a, b) => (a.createdAt !== b.createdAt ? (a.createdAt < b.createdAt ? 1 : -1) : a.id < b.id ? 1 : -1))
    for (const limit of [1, 7, 50, 200]) {
      const { seen } =
        limit === 1
          ? { seen: (await pageThrough("sds", { createdAfter: "2026-01-01T00:00:03Z" }, 1)).seen }
          : await pageThrough("sds", {}, limit)
      if (limit === 1) {
        expect(seen.map((r) => r.id)).toEqual(
          expected.filter((r) => r.createdAt > "2026-01-01T00:00:03.000Z").map((r) => r.id)
        )
      } else {
        expect(seen.map((r) => r.id)).toEqual(expected.map((r) => r.id))
      }
    }
  })

  it("collects every record that existed when paging started exactly once while new ones arrive", async () => {
    const start = Date.parse("2026-06-01T00:00:00Z")
    const stored = await seedRecords(db.sql, "changes", company.id, 2000, { newest: new Date(start), stepMillis: 1000 })
    let arrived = 0
    const { seen } = await pageThrough("changes", {}, 100, async (page) => {
      // newer records arrive between pages, some exactly at the newest time, others later
      const records = Array.from({ length: 25 }, (_, i) =>
        makeRecord("changes", {
          companyId: company.id,
          createdAt: new Date(start + (i % 3 === 0 ? 0 : (page * 100 + i) * 1000)).toISOString()
        })
      )
      await storeRecords(db.sql, "changes", records, company.id)
      arrived += records.length
    })
    const ids = seen.map((r) => r.id)
    expect(new Set(ids).size).toBe(ids.length) // nothing twice
    const original = new Set(stored.map((s) => s.id))
    expect(ids.filter((id) => original.has(id))).toEqual(stored.map((s) => s.id)) // every original, in order
    expect(arrived).toBeGreaterThan(400)
    // still newest first throughout
    for (let i = 1; i < seen.length; i++) expect(seen[i - 1]!.createdAt >= seen[i]!.createdAt).toBe(true)
  })

  it("page N is read from the index like page 1", async () => {
    const first = await api.get("/api/v1/training-records?limit=200", { key })
    let cursor = first.json.nextCursor as string
    for (let i = 0; i < 10; i++)
      cursor = (await api.get(`/api/v1/training-records?limit=200&cursor=${cursor}`, { key })).json.nextCursor
    // The same statement the API runs for a later page, explained
    const [last] = await db.sql<{ created_at: string; id: string }[]>`
      select created_at::text, id::text from service.views where resource = 'training-records' and company_id = ${company.id}
      order by created_at desc, id desc offset 2199 limit 1`
    const plan = await db.sql<{ "QUERY PLAN": string }[]>`
      explain (analyze, buffers, format text)
      select v.id::text, v.body from service.views v
       where v.company_id = ${company.id} and v.resource = 'training-records'
         and service.resource_no(v.resource) = service.resource_no('training-records')
         and (v.created_at, v.id) < (${last!.created_at}::timestamptz, ${last!.id}::uuid)
       order by v.created_at desc, v.id desc limit 201`
    const text = plan.map((r) => r["QUERY PLAN"]).join("\n")
    expect(text).toMatch(/Index Scan using views_page/)
    expect(text).not.toMatch(/Sort/)
    const rows = Number(/Index Scan[^\n]*rows=(\d+)/.exec(text)?.[1])
    expect(rows).toBeLessThanOrEqual(201)
  })
})
