// Requests read by one statement (src/read/batch.ts, src/read/views.ts): started together,
// they share a batch, and each must still get exactly its own answer: its key's refusal,
// its company's records, its resource, its filters, its page, or no such record.
import { Effect, Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { CurrentKeyShape } from "../../src/access/keys/current-key.ts"
import type { Json } from "../../src/read/served.ts"
import { Views } from "../../src/read/views.ts"
import { BASE_QUERY } from "../../src/faces/api/query.ts"
import type { Resource } from "../../src/domain/resources.ts"
import { createCompany, seedRecords, type StoredRecord, type TestCompany } from "../support/views.ts"
import { makeKey, revokeKeyAs, startViews } from "../support/http.ts"
import { useDatabase } from "../support/fixtures.ts"

/** A list query as the endpoint decodes it (a number, canonical timestamps). */
const listQuery = Schema.decodeUnknownSync(Schema.Struct(BASE_QUERY))

const T0 = Date.parse("2026-05-01T12:00:00.000Z")

describe("requests read together", () => {
  const db = useDatabase()
  let acme: TestCompany
  let other: TestCompany
  const seeded = new Map<string, ReadonlyArray<StoredRecord>>()
  let run: <A, E>(effect: Effect.Effect<A, E, Views>) => Promise<A>
  let close: () => Promise<void>

  beforeAll(async () => {
    acme = await createCompany(db.sql, { name: "Acme Safety" })
    other = await createCompany(db.sql, { name: "Other Co" })
    for (const r of ["incidents", "workers"] as const) {
      seeded.set(
        `acme ${r}`,
        await seedRecords(db.sql, r, acme.id, 12, { newest: new Date(T0), stepMillis: 3_600_000 })
      )
    }
    seeded.set("other incidents", await seedRecords(db.sql, "incidents", other.id, 3, { newest: new Date(T0) }))
    // The service with its pool, kept for the whole suite.
    ;({ run, close } = await startViews(db))
  })
  afterAll(async () => {
    await close?.()
  })

  const keyOf = async (
    company: TestCompany,
    scopes?: ReadonlyArray<Resource>
  ): Promise<CurrentKeyShape & { readonly id: string }> => {
    const k = await makeKey(db, company, scopes === undefined ? {} : { scopes })
    return {
      id: k.id,
      keyId: k.id,
      keyName: "test key",
      companyId: company.id,
      companyName: "",
      expiresAt: null,
      webhooks: false,
      scopes: new Set(),
      modules: new Set(),
      readable: [],
      host: undefined
    }
  }

  /** What one request gets: its JSON as text, or its error's kind and message. */
  const outcome = <E extends { readonly _tag: string; readonly message: string }>(
    request: Effect.Effect<Json, E, Views>
  ) =>
    Effect.map(Effect.result(request), (r) =>
      r._tag === "Success" ? Buffer.from(r.success).toString("utf8") : `${r.failure._tag}: ${r.failure.message}`
    )
  const ids = (answer: string) =>
    answer.startsWith("{") ? JSON.parse(answer).data.map((r: { id: string }) => r.id) : answer

  it("gets and lists of several keys, companies, resources and filters in one batch", async () => {
    const mine = await keyOf(acme)
    const theirs = await keyOf(other)
    const revoked = await keyOf(acme)
    await revokeKeyAs(db, acme, revoked.id)
    const incidents = seeded.get("acme incidents")!
    const workers = seeded.get("acme workers")!
    const theirIncidents = seeded.get("other incidents")!
    const next = JSON.parse(
      await run(
        Effect.flatMap(Effect.service(Views), (v) => outcome(v.list(mine, "incidents", listQuery({ limit: "5" }))))
      )
    ).nextCursor
    const [gets, lists] = await run(
      Effect.flatMap(Effect.service(Views), (v) =>
        Effect.all(
          [
            Effect.all(
              [
                outcome(v.get(mine, "incidents", incidents[0]!.id)),
                outcome(v.get(mine, "workers", workers[1]!.id)),
                outcome(v.get(mine, "workers", incidents[2]!.id)),
                outcome(v.get(theirs, "incidents", incidents[0]!.id)),
                outcome(v.get(theirs, "incidents", theirIncidents[1]!.id)),
                outcome(v.get(revoked, "incidents", incidents[1]!.id))
              ],
              { concurrency: "unbounded" }
            ),
            Effect.all(
              [
                outcome(v.list(mine, "incidents", listQuery({ limit: "5" }))),
                outcome(v.list(mine, "incidents", listQuery({ limit: "5", cursor: next }))),
                outcome(v.list(mine, "incidents", listQuery({ createdBefore: incidents[9]!.createdAt }))),
                outcome(v.list(mine, "incidents", listQuery({ createdAfter: incidents[3]!.createdAt }))),
                outcome(v.list(mine, "workers", listQuery({ limit: "3" }))),
                outcome(v.list(theirs, "incidents", {})),
                outcome(v.list(revoked, "workers", {}))
              ],
              { concurrency: "unbounded" }
            )
          ],
          { concurrency: "unbounded" }
        )
      )
    )
    expect(gets).toEqual([
      `{"data":${incidents[0]!.body}}`,
      `{"data":${workers[1]!.body}}`,
      `NotFound: no workers record with id ${incidents[2]!.id}`,
      `NotFound: no incidents record with id ${incidents[0]!.id}`,
      `{"data":${theirIncidents[1]!.body}}`,
      "Unauthorized: this API key was revoked"
    ])
    const page = (records: ReadonlyArray<StoredRecord>, from: number, to: number) =>
      records.slice(from, to).map((r) => r.id)
    expect(lists.map(ids)).toEqual([
      page(incidents, 0, 5),
      page(incidents, 5, 10),
      page(incidents, 10, 12),
      page(incidents, 0, 3),
      page(workers, 0, 3),
      page(theirIncidents, 0, 3),
      "Unauthorized: this API key was revoked"
    ])
  })
})
