// A destination's rate and ordering (endpoints and API subscriptions), and its circuit as
// admins see it: the rules, what is stored, and refusals that change nothing.
import { describe, expect, it } from "vitest"
import {
  enableEndpoint,
  getEndpoint,
  listEndpoints,
  updateEndpoint
} from "../../../src/webhooks/endpoints/endpoints.ts"
import { parseOrdering, parseRateLimit, parseRateLimitText } from "../../../src/webhooks/endpoints/validate.ts"
import { createHook, getHook, listHooks } from "../../../src/webhooks/subscriptions/hooks.ts"
import { listSubscriptions } from "../../../src/webhooks/subscriptions/subscriptions.ts"
import { addEndpoint, ADMIN, failure, makeKey, useWorld } from "../../support/world.ts"
import { runSql } from "../../support/sql.ts"

const RATE_ERROR =
  "rateLimit must be a number of deliveries per second from 0.01 to 1000 (e.g. 5 or 0.5), or null for no limit"
const ORDERING_ERROR =
  'ordering must be "record" (events of one record in the order they happened) or "none" (no order, the default)'

describe("the rules", () => {
  it.each([
    [5, 5],
    [0.5, 0.5],
    [0.01, 0.01],
    [1000, 1000],
    [null, null]
  ])("rateLimit %j is %j", (input, expected) => {
    expect(parseRateLimit(input)).toBe(expected)
  })

  it.each([0, -1, 0.001, 1000.5, 1e9, Number.NaN, Number.POSITIVE_INFINITY, "5", "", true, {}, [5]])(
    "rateLimit %j is refused",
    (input) => {
      expect(() => parseRateLimit(input)).toThrow(RATE_ERROR)
    }
  )

  it.each([
    ["5", 5],
    [" 0.5 ", 0.5],
    ["1000", 1000],
    ["none", null],
    ["None", null],
    ["", null]
  ])("rateLimit as text %j is %j", (input, expected) => {
    expect(parseRateLimitText(input)).toBe(expected)
  })

  it.each(["0", "-1", "1e3", "5/s", "five", "0x10", "1000.01", "Infinity"])(
    "rateLimit as text %j is refused",
    (input) => {
      expect(() => parseRateLimitText(input)).toThrow(RATE_ERROR)
    }
  )

  it.each(["record", "none"])("ordering %j is taken", (input) => {
    expect(parseOrdering(input)).toBe(input)
  })

  it.each(["Record", "fifo", "", null, 1, ["record"]])("ordering %j is refused", (input) => {
    expect(() => parseOrdering(input)).toThrow(ORDERING_ERROR)
  })
})

const w = useWorld()

const row = async (id: string) =>
  (
    await w.db.sql<{ rate_limit: number | null; ordering: string; updated_at: Date }[]>`
      select rate_limit, ordering, updated_at from service.webhook_endpoints where id = ${id}`
  )[0]!

describe("an endpoint's rate and ordering", () => {
  it("are taken at creation, shown, changed one at a time, and cleared", async () => {
    const e = await addEndpoint(w, "/paced", { name: "Paced", rateLimit: 2.5, ordering: "record" })
    expect(e.endpoint).toMatchObject({ rateLimit: 2.5, ordering: "record", circuit: { state: "closed" } })
    const plain = await addEndpoint(w, "/plain", { name: "Plain" })
    expect(plain.endpoint).toMatchObject({ rateLimit: null, ordering: "none" })

    const slower = await runSql(w.deps.sql, updateEndpoint(w.deps, ADMIN, { id: e.id, rateLimit: 1 }))
    expect(slower).toMatchObject({ rateLimit: 1, ordering: "record", name: "Paced" })
    const unordered = await runSql(w.deps.sql, updateEndpoint(w.deps, ADMIN, { id: e.id, ordering: "none" }))
    expect(unordered).toMatchObject({ rateLimit: 1, ordering: "none" })
    const free = await runSql(w.deps.sql, updateEndpoint(w.deps, ADMIN, { id: e.id, rateLimit: null }))
    expect(free.rateLimit).toBeNull()
    const logged = await w.db.sql<{ details: Record<string, unknown> }[]>`
      select details from service.activity where kind = 'endpoint.updated' and subject_id = ${e.id} order by id`
    expect(logged.map((l) => l.details)).toEqual([{ rateLimit: 1 }, { ordering: "none" }, { rateLimit: null }])
  })

  it("bad values are refused with 400 and change nothing", async () => {
    const bad = await failure(addEndpoint(w, "/fast", { name: "Too fast", rateLimit: 1e6 }))
    expect([bad.status, bad.message, bad.field]).toEqual([400, RATE_ERROR, "rateLimit"])
    expect((await runSql(w.deps.sql, listEndpoints({ companyId: w.company.id }))).map((x) => x.name)).not.toContain(
      "Too fast"
    )

    const e = await addEndpoint(w, "/kept", { name: "Kept", rateLimit: 3 })
    const before = await row(e.id)
    for (const [rateLimit, ordering, message] of [
      [-2, undefined, RATE_ERROR],
      ["3", undefined, RATE_ERROR],
      [0, undefined, RATE_ERROR],
      [undefined, "fifo", ORDERING_ERROR],
      [5, "sometimes", ORDERING_ERROR]
    ] as const) {
      const f = await failure(runSql(w.deps.sql, updateEndpoint(w.deps, ADMIN, { id: e.id, rateLimit, ordering })))
      expect([f.status, f.message]).toEqual([400, message])
    }
    expect(await row(e.id)).toEqual(before)
  })
})

describe("an endpoint's circuit, as admins see it", () => {
  it("shows open with its next probe; Turn On and a new address close it", async () => {
    const e = await addEndpoint(w, "/dark", { name: "Dark" })
    const open = async () =>
      w.db.sql`
        insert into service.webhook_circuits (endpoint_id, company_id, state, failures, opened_at, probe_at, probes, last_error)
        values (${e.id}, ${w.company.id}, 'open', 5, '2026-03-04T05:06:07.089Z', '2026-03-04T05:07:07.089Z', 1, 'timeout: no complete answer within 10000 ms')`
    await open()
    expect((await runSql(w.deps.sql, getEndpoint({ id: e.id }))).circuit).toEqual({
      state: "open",
      failures: 5,
      openedAt: "2026-03-04T05:06:07.089Z",
      nextProbeAt: "2026-03-04T05:07:07.089Z",
      probes: 1,
      lastError: "timeout: no complete answer within 10000 ms"
    })
    await w.db.sql`update service.webhook_circuits set state = 'half_open' where endpoint_id = ${e.id}`
    expect((await runSql(w.deps.sql, getEndpoint({ id: e.id }))).circuit.state).toBe("half-open")

    // Turned off and on again (its receiver fixed): tried afresh.
    await w.db.sql`update service.webhook_endpoints set enabled = false where id = ${e.id}`
    const on = await runSql(w.deps.sql, enableEndpoint(ADMIN, { id: e.id }))
    expect(on.circuit.state).toBe("closed")
    expect((await runSql(w.deps.sql, getEndpoint({ id: e.id }))).circuit.state).toBe("closed")

    await open()
    const moved = await runSql(w.deps.sql, updateEndpoint(w.deps, ADMIN, { id: e.id, url: w.receiver.url("/moved") }))
    expect(moved.circuit.state).toBe("closed")
    expect((await runSql(w.deps.sql, getEndpoint({ id: e.id }))).circuit.state).toBe("closed")
  })
})

describe("a subscription's rate and ordering (POST /api/v1/hooks)", () => {
  it("are taken, shown only when set, replaced by a repeated subscribe that gives them, and bad ones change nothing", async () => {
    const key = {
      keyId: await makeKey(w.db.sql, w.company.id, { scopes: ["incidents"] }),
      companyId: w.company.id
    }
    const url = w.receiver.url("/sub-paced")
    const made = await runSql(
      w.deps.sql,
      createHook(w.deps, key, { url, event: "incident.created", rateLimit: 0.5, ordering: "record" })
    )
    expect(made.created).toBe(true)
    expect(made.subscription).toMatchObject({ rateLimit: 0.5, ordering: "record" })
    const plain = await runSql(
      w.deps.sql,
      createHook(w.deps, key, { url: w.receiver.url("/sub-plain"), event: "incident.created" })
    )
    expect(Object.keys(plain.subscription).sort()).toEqual([
      "active",
      "createdAt",
      "event",
      "id",
      "name",
      "secret",
      "url"
    ])

    // Repeated, with a new rate and no ordering: the rate changes, the ordering stays.
    const again = await runSql(w.deps.sql, createHook(w.deps, key, { url, event: "incident.created", rateLimit: 4 }))
    expect(again.created).toBe(false)
    expect(again.subscription).toMatchObject({ id: made.subscription.id, rateLimit: 4, ordering: "record" })
    const cleared = await runSql(
      w.deps.sql,
      createHook(w.deps, key, { url, event: "incident.created", rateLimit: null, ordering: "none" })
    )
    expect(cleared.subscription.rateLimit).toBeUndefined()
    expect(cleared.subscription.ordering).toBeUndefined()

    const count = async () =>
      (
        await w.db.sql<
          { n: number }[]
        >`select count(*)::int as n from service.webhook_subscriptions where key_id = ${key.keyId}`
      )[0]!.n
    const before = await count()
    for (const [body, message] of [
      [{ url: w.receiver.url("/sub-bad"), event: "incident.created", rateLimit: 0 }, RATE_ERROR],
      [{ url: w.receiver.url("/sub-bad"), event: "incident.created", rateLimit: "fast" }, RATE_ERROR],
      [{ url: w.receiver.url("/sub-bad"), event: "incident.created", ordering: "strict" }, ORDERING_ERROR],
      [{ url, event: "incident.created", rateLimit: 5000 }, RATE_ERROR]
    ] as const) {
      const f = await failure(runSql(w.deps.sql, createHook(w.deps, key, body)))
      expect([f.status, f.message]).toEqual([400, message])
    }
    expect(await count()).toBe(before)
    expect(await runSql(w.deps.sql, getHook(key, made.subscription.id))).not.toHaveProperty("rateLimit")
    expect((await runSql(w.deps.sql, listHooks(key))).data).toHaveLength(before)

    const admin = await runSql(w.deps.sql, listSubscriptions({ companyId: w.company.id, keyId: key.keyId }))
    expect(admin.map((s) => [s.url, s.rateLimit, s.ordering, s.circuit.state]).sort()).toEqual(
      [
        [url, null, "none", "closed"],
        [w.receiver.url("/sub-plain"), null, "none", "closed"]
      ].sort()
    )
  })
})
