// The name filter of a big company (src/read/views.ts): a walk along the page index through
// the newest 5,000 records, then the matches of ranges of days, newest first, through the
// name index's day keys (sql/040_name_days.sql, src/read/lists.ts). Whichever finds them, a
// name's records come newest first (ties by id), every page as long as asked, and the
// cursors lead through all of them and no other company's, resource's or name's.
import { Effect, Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { CurrentKeyShape } from "../../src/access/keys/current-key.ts"
import type { Resource } from "../../src/domain/resources.ts"
import { NAME_QUERY } from "../../src/faces/api/query.ts"
import { Views } from "../../src/read/views.ts"
import { useDatabase } from "../support/fixtures.ts"
import { makeKey, revokeKeyAs, startViews } from "../support/http.ts"
import { createCompany, type TestCompany } from "../support/views.ts"

const listQuery = Schema.decodeUnknownSync(Schema.Struct(NAME_QUERY))

/** The newest filler: the walk's 5,000 newest records are all after it. */
const T0 = Date.parse("2026-05-01T12:00:00.000Z")
const DAY = 86_400_000
const iso = (ms: number) => new Date(ms).toISOString()

interface Row {
  readonly id: string
  readonly name: string
  readonly createdAt: number
}

/**
 * The names looked for, each with its creation time. Among the newest 5,000 records ("Quill")
 * three, so the walk finds less than a page; the others spread over two years before, some
 * days with many, some records created at the same instant (ordered by id), one before 1970
 * (a negative day), one in year 900, one on a day's first instant and one on its last.
 */
const quillTimes = (): ReadonlyArray<number> => {
  const times: Array<number> = [T0 - 10 * 60_000, T0 - 2 * DAY, T0 - 3 * DAY - 5_000]
  for (let d = 6; d < 700; d += 37) times.push(T0 - d * DAY - (d % 5) * 3_600_000)
  for (let i = 0; i < 40; i++) times.push(T0 - 90 * DAY - i * 60_000) // one busy day
  for (let i = 0; i < 5; i++) times.push(T0 - 200 * DAY) // the same instant
  times.push(Date.parse("2025-01-07T00:00:00.000Z"), Date.parse("2025-01-07T23:59:59.999Z"))
  times.push(Date.parse("1969-12-31T18:00:00.000Z"))
  // So far back that the last range is too long for day keys (views.ts, MAX_DAY_KEYS).
  times.push(Date.parse("0900-03-01T08:00:00.000Z"))
  return times
}

describe("name filter across the walk and the day ranges", () => {
  const db = useDatabase()
  let big: TestCompany
  let other: TestCompany
  let quills: ReadonlyArray<Row>
  let run: <A, E>(effect: Effect.Effect<A, E, Views>) => Promise<A>
  let close: () => Promise<void>
  let key: CurrentKeyShape

  /** Records straight into service.views, as capture writes them: the body is what the API sends. */
  const insert = async (companyId: string, resource: Resource, rows: ReadonlyArray<{ name: string; at: number }>) =>
    db.sql<Array<{ id: string; name: string; created_at: string }>>`
      insert into service.views (resource, id, company_id, created_at, changed_at, name, body)
      select ${resource}, id, ${companyId}, at, at, name,
             json_build_object('id', id, 'name', name, 'createdAt', at)::text
        from (select gen_random_uuid() as id, r.name, r.at
                from unnest(${rows.map((r) => r.name)}::text[], ${rows.map((r) => iso(r.at))}::timestamptz[]) r(name, at)) s
      returning id::text, name, created_at::text`

  beforeAll(async () => {
    big = await createCompany(db.sql, { name: "Big Co" })
    other = await createCompany(db.sql, { name: "Other Co" })
    // 6,000 fillers, a minute apart from T0 back: the walk's 5,000 are the newest of them,
    // with the first three quills among them.
    await insert(
      big.id,
      "workers",
      Array.from({ length: 6000 }, (_, i) => ({ name: `Filler ${i}`, at: T0 - i * 60_000 }))
    )
    const times = quillTimes()
    // Each case the fold ignores: the same name in capitals.
    const inserted = await insert(
      big.id,
      "workers",
      times.map((at, i) => ({ name: `${i % 3 === 0 ? "JO QUILL" : "Jo Quill"} ${i}`, at }))
    )
    quills = inserted.map((r, i) => ({ id: r.id, name: r.name, createdAt: times[i]! }))
    // The same name elsewhere: another resource, another company, and a name that only
    // nearly matches.
    await insert(big.id, "job-sites", [{ name: "Jo Quill Yard", at: T0 - 30 * DAY }])
    await insert(other.id, "workers", [{ name: "Jo Quill 1", at: T0 - 30 * DAY }])
    await insert(big.id, "workers", [{ name: "Jo Quil 1", at: T0 - 30 * DAY }])
    ;({ run, close } = await startViews(db))
    const k = await makeKey(db, big)
    key = {
      keyId: k.id,
      keyName: "test key",
      companyId: big.id,
      companyName: "",
      expiresAt: null,
      webhooks: false,
      scopes: new Set(),
      modules: new Set(),
      readable: [],
      host: undefined
    }
  }, 60_000)
  afterAll(async () => {
    await close?.()
  })

  interface Page {
    readonly data: ReadonlyArray<{ id: string; name: string; createdAt: string }>
    readonly nextCursor: string | null
    readonly nextUpdatedAfter?: string | null
  }
  const list = async (query: Record<string, string>, resource: Resource = "workers"): Promise<Page> =>
    JSON.parse(
      Buffer.from(
        await run(Effect.flatMap(Effect.service(Views), (v) => v.list(key, resource, listQuery(query))))
      ).toString("utf8")
    )
  /** Every page of a list, following nextCursor. */
  const walk = async (query: Record<string, string>) => {
    const pages: Array<Page> = []
    let cursor: string | null = null
    do {
      const page: Page = await list(cursor === null ? query : { ...query, cursor })
      pages.push(page)
      cursor = page.nextCursor
    } while (cursor !== null && pages.length < 100)
    return pages
  }
  /** The quills a list should give, newest first, ties by id (greatest first). */
  const expected = (keep: (r: Row) => boolean = () => true) =>
    quills
      .filter(keep)
      .toSorted((a, b) => b.createdAt - a.createdAt || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0))
      .map((r) => r.id)

  it("a first page holds what the walk found and what the day ranges found, in order", async () => {
    const page = await list({ name: "jo quill", limit: "10" })
    expect(page.data.map((r) => r.id)).toEqual(expected().slice(0, 10))
    // The walk holds three of them; the other seven are older than its 5,000 records.
    expect(page.data.slice(0, 3).every((r) => Date.parse(r.createdAt) > T0 - 5000 * 60_000)).toBe(true)
    expect(page.data.slice(3).every((r) => Date.parse(r.createdAt) < T0 - 5000 * 60_000)).toBe(true)
    expect(page.nextCursor).not.toBeNull()
  })

  it.each([1, 7, 50, 200])("pages of %i lead through every match once, newest first", async (limit) => {
    const pages = await walk({ name: "Jo Quill", limit: String(limit) })
    const all = expected()
    expect(pages.flatMap((p) => p.data.map((r) => r.id))).toEqual(all)
    // Full pages but the last, which says there is no next one.
    expect(pages.map((p) => p.data.length)).toEqual(
      Array.from({ length: Math.ceil(all.length / limit) }, (_, i) => Math.min(limit, all.length - i * limit))
    )
    expect(pages.at(-1)!.nextCursor).toBeNull()
  })

  it("keeps the created-date bounds, across days, ranges and 1970", async () => {
    const after = T0 - 400 * DAY
    const before = T0 - 60 * DAY
    const pages = await walk({ name: "QUILL", limit: "6", createdAfter: iso(after), createdBefore: iso(before) })
    expect(pages.flatMap((p) => p.data.map((r) => r.id))).toEqual(
      expected((r) => r.createdAt > after && r.createdAt < before)
    )
    // A day's first and last instants, a bound on each.
    const day = await list({
      name: "quill",
      createdAfter: "2025-01-06T23:59:59.999Z",
      createdBefore: "2025-01-08T00:00:00.000Z"
    })
    const first = Date.parse("2025-01-07T00:00:00.000Z")
    expect(day.data.map((r) => r.id)).toEqual(expected((r) => r.createdAt >= first && r.createdAt < first + DAY))
    expect(day.data).toHaveLength(2)
    // The oldest, on day -1.
    const old = await list({ name: "quill", createdBefore: "1970-01-01T00:00:00.000Z" })
    expect(old.data.map((r) => r.id)).toEqual(expected((r) => r.createdAt < 0))
  })

  it("a name none has, or only elsewhere: an empty page", async () => {
    expect(await list({ name: "Jo Quill Yard" })).toEqual({ data: [], nextCursor: null })
    expect(await list({ name: "nobody at all" })).toEqual({ data: [], nextCursor: null })
    // The job site is found on its own list.
    expect((await list({ name: "jo quill" }, "job-sites")).data.map((r) => r.name)).toEqual(["Jo Quill Yard"])
  })

  it("a revoked key gets its refusal, on the walk as on the day ranges", async () => {
    const k = await makeKey(db, big)
    await revokeKeyAs(db, big, k.id)
    const revoked = { ...key, keyId: k.id }
    const outcome = await run(
      Effect.flatMap(Effect.service(Views), (v) =>
        Effect.result(v.list(revoked, "workers", listQuery({ name: "jo quill" })))
      )
    )
    expect(outcome._tag === "Failure" ? outcome.failure.message : "answered").toBe("this API key was revoked")
  })

  it("by change time too (sort=updatedAt), oldest change first", async () => {
    const pages = await walk({ name: "jo quill", limit: "25", sort: "updatedAt" })
    const ids = pages.flatMap((p) => p.data.map((r) => r.id))
    expect(ids).toEqual(
      quills.toSorted((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)).map((r) => r.id)
    )
  })
})
