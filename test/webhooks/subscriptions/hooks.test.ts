// /api/v1/hooks underneath the HTTP layer: the rules and shapes of docs/api.md#webhook-subscriptions.
import { ALERT_KINDS } from "../../../src/domain/event-kinds.ts"
import { beforeAll, describe, expect, it } from "vitest"
import { keySecretContext } from "../../../src/platform/db/channels.ts"
import { decryptSecret } from "../../../src/platform/secrets/secrets-key.ts"
import type { DomainError } from "../../../src/domain/errors.ts"
import {
  createHook,
  deleteHook,
  getHook,
  listHooks,
  MAX_SUBSCRIPTIONS_PER_KEY,
  type HookKey
} from "../../../src/webhooks/subscriptions/hooks.ts"
import { answered, failure, makeKey, useWorld, type TestDeps } from "../../support/world.ts"
import { runSql } from "../../support/sql.ts"

const w = useWorld()
let key: HookKey
beforeAll(async () => {
  key = {
    keyId: await makeKey(w.db.sql, w.company.id, { scopes: ["incidents", "corrective-actions"] }),
    companyId: w.company.id
  }
})

const hook = (url: string, event = "incident.created", k: HookKey = key, deps: TestDeps = w.deps) =>
  runSql(deps.sql, createHook(deps, k, { url, event }))

describe("rule 1: the webhooks permission", () => {
  it("a key without it gets 403 on every hooks operation", async () => {
    const plain = { keyId: await makeKey(w.db.sql, w.company.id, { webhooks: false }), companyId: w.company.id }
    const e = await failure(hook(w.receiver.url("/x"), "incident.created", plain))
    expect([e.status, e.message]).toEqual([403, "this key does not have the webhooks permission"])
    expect((await failure(runSql(w.deps.sql, listHooks(plain)))).status).toBe(403)
    expect((await failure(runSql(w.deps.sql, getHook(plain, "00000000-0000-0000-0000-000000000000")))).status).toBe(403)
    expect((await failure(runSql(w.deps.sql, deleteHook(plain, "00000000-0000-0000-0000-000000000000")))).status).toBe(
      403
    )
  })
})

describe("rule 2: https and public addresses only", () => {
  it.each([
    ["http://", () => w.receiver.url("/x").replace("https:", "http:"), /^url refused: only https:\/\//],
    ["a private address", () => "https://10.1.2.3/hook", /^url refused: 10\.1\.2\.3 is not a public address/],
    ["loopback when not allowed", () => "https://[::1]/hook", /^url refused: ::1 is not a public address/],
    ["not a URL", () => "hooks.example.com/x", /^url invalid url/],
    ["no url", () => "", /^url must be an https:\/\/ address$/]
  ])("%s is refused with 400", async (_, url, message) => {
    const e = await failure(hook(url()))
    expect(e.status).toBe(400)
    expect(e.message).toMatch(message)
  })

  it("a body that is not an object is refused with 400", async () => {
    expect((await failure(runSql(w.deps.sql, createHook(w.deps, key, "nope")))).status).toBe(400)
    expect((await failure(runSql(w.deps.sql, createHook(w.deps, key, [1])))).status).toBe(400)
  })
})

describe("rule 3: a known event the key can read", () => {
  it("an unknown event is 400", async () => {
    const e = await failure(hook(w.receiver.url("/x"), "incident.deleted"))
    expect(e.status).toBe(400)
    expect(e.message).toMatch(/^unknown event "incident\.deleted"; known events: incident\.created, /)
  })

  it("an event of records the key cannot read is 403", async () => {
    const e = await failure(hook(w.receiver.url("/x"), "permit.approved"))
    expect([e.status, e.message]).toEqual([403, "this key cannot read permits, the records of permit.approved"])
  })

  it("an event whose module is off is 403, and is not offered", async () => {
    await w.db
      .sql`update app.company_modules set enabled = false where company_id = ${w.company.id} and module = 'corrective-actions'`
    await w.cap.settle()
    try {
      expect((await failure(hook(w.receiver.url("/x"), "corrective_action.closed"))).status).toBe(403)
      expect((await runSql(w.deps.sql, listHooks(key))).events).toEqual(["incident.created", ...ALERT_KINDS])
    } finally {
      await w.db.sql`update app.company_modules set enabled = true where company_id = ${w.company.id}`
      await w.cap.settle()
    }
  })
})

describe("subscribing, reading and deleting", () => {
  it("answers the 2.4 record with the key's secret; a repeat returns the same subscription", async () => {
    const url = w.receiver.url("/created")
    const first = await hook(url)
    expect(first.created).toBe(true)
    const s = first.subscription
    expect(Object.keys(s).sort()).toEqual(["active", "createdAt", "event", "id", "name", "secret", "url"])
    expect(s).toMatchObject({ name: "incident.created", event: "incident.created", url, active: true })
    expect(s.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    expect(s.secret).toMatch(/^whsec_/)

    const again = await hook(url)
    expect(again.created).toBe(false)
    expect(again.subscription).toEqual(s)
    const [n] = await w.db.sql<
      { n: number }[]
    >`select count(*)::int as n from service.webhook_subscriptions where url = ${url}`
    expect(n!.n).toBe(1)

    // Rule 6: one secret per key, shared by every subscription it makes; stored encrypted.
    const other = await hook(w.receiver.url("/created"), "corrective_action.created")
    expect(other.subscription.secret).toBe(s.secret)
    const [stored] = await w.db.sql<
      { secret: Buffer }[]
    >`select secret from service.webhook_key_secrets where key_id = ${key.keyId}`
    expect(stored!.secret.includes(Buffer.from(s.secret.slice(6)))).toBe(false)
    expect(decryptSecret(w.deps.secretsKey, stored!.secret, keySecretContext(key.keyId))).toBe(s.secret)

    // GET never shows the secret.
    const got = await runSql(w.deps.sql, getHook(key, s.id))
    expect(got).toEqual({ id: s.id, name: s.name, url: s.url, event: s.event, active: true, createdAt: s.createdAt })
    const list = await runSql(w.deps.sql, listHooks(key))
    expect(JSON.stringify(list)).not.toContain(s.secret)
    expect(list.data.map((d) => d.id)).toEqual(expect.arrayContaining([s.id, other.subscription.id]))
    expect(list.events).toEqual([
      "incident.created",
      "corrective_action.created",
      "corrective_action.closed",
      ...ALERT_KINDS
    ])
  })

  it("rule 4: another key's or a missing subscription is 404, and cannot be deleted", async () => {
    const mine = (await hook(w.receiver.url("/mine"))).subscription
    const stranger = { keyId: await makeKey(w.db.sql, w.company.id), companyId: w.company.id }
    for (const id of [mine.id, "3f1d1e0e-0000-4000-8000-000000000000", "not-a-uuid", "'; drop table x; --"]) {
      const g = await failure(runSql(w.deps.sql, getHook(stranger, id)))
      expect([g.status, g.message]).toEqual([404, "no such subscription"])
      expect((await failure(runSql(w.deps.sql, deleteHook(stranger, id)))).status).toBe(404)
    }
    expect((await runSql(w.deps.sql, listHooks(stranger))).data).toEqual([])
    expect((await runSql(w.deps.sql, getHook(key, mine.id))).id).toBe(mine.id)
  })

  it("DELETE removes the subscription and logs both changes as the key's", async () => {
    const s = (await hook(w.receiver.url("/bye"))).subscription
    await runSql(w.deps.sql, deleteHook(key, s.id))
    expect((await failure(runSql(w.deps.sql, getHook(key, s.id)))).status).toBe(404)
    const logs = await w.db.sql<{ kind: string; details: { byKey: string } }[]>`
      select kind, details from service.activity where subject_id = ${s.id} order by id`
    expect(logs.map((l) => [l.kind, l.details.byKey])).toEqual([
      ["subscription.created", key.keyId],
      ["subscription.deleted", key.keyId]
    ])
  })
})

describe("rule 5: at most 50 subscriptions per key", () => {
  it("refuses the 51st with 400, even under concurrent subscribes, but a repeat still answers", async () => {
    const k = { keyId: await makeKey(w.db.sql, w.company.id), companyId: w.company.id }
    for (let i = 0; i < MAX_SUBSCRIPTIONS_PER_KEY - 2; i++)
      await hook(w.receiver.url(`/many/${i}`), "incident.created", k)
    const racing = await Promise.allSettled(
      Array.from({ length: 6 }, (_, i) => hook(w.receiver.url(`/race/${i}`), "incident.created", k))
    )
    expect(racing.filter((r) => r.status === "fulfilled")).toHaveLength(2)
    for (const r of racing.filter((r) => r.status === "rejected")) {
      const e = answered((r as PromiseRejectedResult).reason as DomainError)
      expect([e.status, e.message]).toEqual([400, "this key already holds 50 subscriptions, the most a key may hold"])
    }
    expect((await runSql(w.deps.sql, listHooks(k))).data).toHaveLength(50)
    expect((await hook(w.receiver.url("/many/0"), "incident.created", k)).created).toBe(false)
  })
})
