// The events feed's queries: 30 days, newest first, paged by cursor, scoped to what the key
// could subscribe to (its scopes, modules on now), and each event exactly as delivered.
import { randomBytes } from "node:crypto"

import { describe, expect, it } from "vitest"
import { cursorKey } from "../../src/read/cursor.ts"
import { Exit, Schema } from "effect"
import { getEvent, listEvents, type FeedKey } from "../../src/read/events.ts"
import { EVENTS_PARAMS } from "../../src/read/lists.ts"
import type { Served } from "../../src/read/served.ts"
import { EVENTS_QUERY } from "../../src/faces/api/events-api.ts"
import { describeQueryIssue } from "../../src/faces/api/query.ts"
import { FILTER_DATE_FORMATS } from "../../src/domain/dates.ts"
import { insertIncident, makeCompany } from "../support/app.ts"
import { addEndpoint, makeKey, useEngine, useWorld, waitFor } from "../support/world.ts"

type Listed = {
  data: Array<{ id: string; event: string; createdAt: string; data: Record<string, unknown> }>
  nextCursor: string | null
}

const w = useWorld()
useEngine(w)
const key = cursorKey(randomBytes(32))
const HOUR = 3_600_000

/** The query as GET /api/v1/events decodes it, then the feed. */
const decodeQuery = Schema.decodeUnknownExit(Schema.Struct(EVENTS_QUERY), {
  onExcessProperty: "error",
  errors: "first"
})
const feed = (feedKey: FeedKey, query: Record<string, string>) => {
  const decoded = decodeQuery(query)
  if (Exit.isFailure(decoded)) throw new Error(`${JSON.stringify(query)} does not decode`)
  return listEvents(w.db.sql, key, feedKey, decoded.value)
}
/** What the 400 for a query says (request-errors.ts words it so). */
const refusal = (query: Record<string, string>): string => {
  const decoded = decodeQuery(query)
  if (Exit.isSuccess(decoded)) return "decoded"
  const failure = decoded.cause.reasons.find((r) => r._tag === "Fail")
  return failure === undefined
    ? "no failure"
    : describeQueryIssue((failure.error as Schema.SchemaError).issue, EVENTS_PARAMS)
}

const body = (a: Served<unknown>) => {
  if (a._tag !== "Body") throw new Error(`expected a body, got ${JSON.stringify(a)}`)
  return typeof a.body === "string" ? a.body : new TextDecoder().decode(a.body)
}

/** Synthetic outbox rows, one every 7 hours back to 42 days, cycling through three kinds. */
const KINDS = [
  ["incident.created", "incidents"],
  ["corrective_action.closed", "corrective-actions"],
  ["permit.closed", "permits"]
] as const
let lsnBase = 0x100
const backfill = async (companyId: string) => {
  const base = lsnBase
  lsnBase += 1000
  const rows = Array.from({ length: 144 }, (_, i) => {
    const [event, resource] = KINDS[i % 3]!
    const recordId = crypto.randomUUID()
    return {
      company_id: companyId,
      event,
      resource,
      record_id: recordId,
      commit_lsn: `0/${(base + i).toString(16)}`,
      seq: 0,
      payload: JSON.stringify({ id: recordId, n: i }),
      created_at: new Date(Date.now() - (i * 7 + 1) * HOUR).toISOString()
    }
  })
  await w.db.sql`insert into service.events ${w.db.sql(rows)}`
  return rows
}

describe("events feed", () => {
  it("an event is shown exactly as it was delivered, under the event's id", async () => {
    await addEndpoint(w, "/feed", { name: "Feed" })
    const incident = await insertIncident(w.db.sql, w.company.id, { title: "Ladder slipped", person_name: "Sam Smith" })
    await w.cap.settle()
    const delivered = await waitFor(() => w.receiver.requests.find((r) => r.path === "/feed"), "the delivery")
    const text = delivered.body.toString("utf8")
    const deliveryId = delivered.headers["service-delivery"] as string
    const [ev] = await w.db.sql<{ id: string }[]>`select id::text from service.events where record_id = ${incident}`
    const keyId = await makeKey(w.db.sql, w.company.id, { scopes: ["incidents"] })
    const feedKey: FeedKey = { keyId, companyId: w.company.id, host: undefined }
    const one = body(await getEvent(w.db.sql, feedKey, ev!.id))
    // byte for byte the delivered body, with the event's id where the delivery's id was
    expect(one).toBe(`{"data":${text.replace(`"id":"${deliveryId}"`, `"id":"${ev!.id}"`)}}`)
    const page = JSON.parse(body(await feed(feedKey, { limit: "1" }))) as Listed
    expect(page.data[0]!.id).toBe(ev!.id)
    expect(JSON.stringify(page.data[0])).toBe(one.slice('{"data":'.length, -1))
  })

  it("pages through 30 days, newest first, of the kinds the key may read in modules that are on", async () => {
    const company = await makeCompany(w.db.sql)
    await w.cap.settle()
    const rows = await backfill(company.id)
    const keyId = await makeKey(w.db.sql, company.id, { scopes: ["incidents", "corrective-actions"] })
    const feedKey: FeedKey = { keyId, companyId: company.id, host: undefined }
    const expected = rows
      .filter((r) => r.resource !== "permits" && Date.now() - Date.parse(r.created_at) < 30 * 24 * HOUR)
      .sort((a, b) => b.created_at.localeCompare(a.created_at))
      .map((r) => r.record_id)
    expect(expected.length).toBeGreaterThan(60)
    const seen: string[] = []
    let cursor: string | undefined
    let pages = 0
    do {
      const page = JSON.parse(body(await feed(feedKey, { limit: "25", ...(cursor ? { cursor } : {}) }))) as Listed
      seen.push(...page.data.map((e) => e.data.id as string))
      cursor = page.nextCursor ?? undefined
      pages++
    } while (cursor)
    expect(seen).toEqual(expected)
    expect(pages).toBe(Math.ceil(expected.length / 25))

    // type, and dates, as the other lists take them
    const closed = JSON.parse(body(await feed(feedKey, { type: "corrective_action.closed", limit: "200" }))) as Listed
    expect(closed.data.every((e) => e.event === "corrective_action.closed")).toBe(true)
    expect(closed.data.map((e) => e.data.id)).toEqual(
      expected.filter((id) => rows.find((r) => r.record_id === id)!.resource === "corrective-actions")
    )
    const after = new Date(Date.now() - 48 * HOUR).toISOString()
    const recent = JSON.parse(body(await feed(feedKey, { createdAfter: after, limit: "200" }))) as Listed
    expect(recent.data.map((e) => e.data.id)).toEqual(
      rows
        .filter((r) => r.resource !== "permits" && r.created_at > after)
        .sort((a, b) => b.created_at.localeCompare(a.created_at))
        .map((r) => r.record_id)
    )
    const day = JSON.parse(
      body(await feed(feedKey, { createdBefore: after, createdAfter: new Date(Date.now() - 72 * HOUR).toISOString() }))
    ) as Listed
    expect(day.data.length).toBeGreaterThan(0)
    expect(day.data.every((e) => e.createdAt < after)).toBe(true)

    // a module turned off hides its events at once; the key's scopes hide the rest
    await w.db
      .sql`update app.company_modules set enabled = false where company_id = ${company.id} and module = 'corrective-actions'`
    await w.cap.settle()
    const fewer = JSON.parse(body(await feed(feedKey, { limit: "200" }))) as Listed
    expect(fewer.data.every((e) => e.event === "incident.created")).toBe(true)
    expect(fewer.data.map((e) => e.data.id)).toEqual(
      expected.filter((id) => rows.find((r) => r.record_id === id)!.resource === "incidents")
    )
  })

  it("400 for an unknown type, a bad limit, date or cursor; 403 for a type the key cannot read; 404 for what it cannot see", async () => {
    const company = await makeCompany(w.db.sql)
    const other = await makeCompany(w.db.sql)
    await w.cap.settle()
    const rows = await backfill(company.id)
    await backfill(other.id)
    const keyId = await makeKey(w.db.sql, company.id, { scopes: ["incidents"] })
    const feedKey: FeedKey = { keyId, companyId: company.id, host: undefined }
    // The query's schema refuses these before the feed runs (each a 400 over HTTP).
    expect(refusal({ type: "incident.exploded" })).toContain('"type" must be one of incident.created,')
    expect(refusal({ limit: "0" })).toBe('query parameter "limit" must be an integer from 1 to 200')
    expect(refusal({ limit: "201" })).toBe('query parameter "limit" must be an integer from 1 to 200')
    expect(refusal({ createdAfter: "last week" })).toMatch(/^query parameter "createdAfter" must be a date/)
    // The same words as the record lists, formats included.
    expect(refusal({ createdBefore: "2026-11-19T00:00:00 02:00" })).toBe(
      `query parameter "createdBefore" must be ${FILTER_DATE_FORMATS} (a "+" in a URL must be sent as %2B)`
    )
    expect(await feed(feedKey, { cursor: "nope" })).toMatchObject({ _tag: "Failed", error: { _tag: "Invalid" } })
    const page = JSON.parse(body(await feed(feedKey, { limit: "2" }))) as Listed
    expect(await feed(feedKey, { limit: "2", cursor: page.nextCursor!, type: "incident.created" })).toMatchObject({
      _tag: "Failed",
      error: { _tag: "Invalid", message: expect.stringContaining("cursor belongs to another list") }
    })
    expect(await feed(feedKey, { type: "permit.closed" })).toMatchObject({
      _tag: "Failed",
      error: { _tag: "Forbidden", message: "this API key cannot read permits, so it cannot see permit.closed events" }
    })
    const idOf = async (r: { commit_lsn: string }) =>
      (
        await w.db.sql<
          { id: string }[]
        >`select id::text from service.events where commit_lsn = ${r.commit_lsn}::pg_lsn and company_id = ${company.id}`
      )[0]!.id
    const recentIncident = rows.find((r) => r.resource === "incidents")!
    expect(await getEvent(w.db.sql, feedKey, await idOf(recentIncident))).toMatchObject({ _tag: "Body" })
    const permit = rows.find((r) => r.resource === "permits")!
    expect(await getEvent(w.db.sql, feedKey, await idOf(permit))).toMatchObject({
      _tag: "Failed",
      error: { _tag: "NotFound" }
    })
    const old = rows.filter((r) => r.resource === "incidents").at(-1)!
    expect(Date.now() - Date.parse(old.created_at)).toBeGreaterThan(30 * 24 * HOUR)
    expect(await getEvent(w.db.sql, feedKey, await idOf(old))).toMatchObject({
      _tag: "Failed",
      error: { _tag: "NotFound" }
    })
    const [foreign] = await w.db.sql<
      { id: string }[]
    >`select id::text from service.events where company_id = ${other.id} and resource = 'incidents' limit 1`
    expect(await getEvent(w.db.sql, feedKey, foreign!.id)).toMatchObject({
      _tag: "Failed",
      error: { _tag: "NotFound" }
    })
    expect(await getEvent(w.db.sql, feedKey, "not-a-uuid")).toMatchObject({
      _tag: "Failed",
      error: { _tag: "NotFound" }
    })
    // a revoked key is refused before anything else
    await w.db.sql`update service.api_keys set revoked_at = now() where id = ${keyId}`
    expect(await feed(feedKey, {})).toMatchObject({ _tag: "Refused", state: "revoked" })
    expect(await feed(feedKey, { cursor: "nope" })).toMatchObject({ _tag: "Refused", state: "revoked" })
    expect(await getEvent(w.db.sql, feedKey, foreign!.id)).toMatchObject({ _tag: "Refused", state: "revoked" })
  })
})
