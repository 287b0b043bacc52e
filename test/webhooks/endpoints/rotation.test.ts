// Rotation with overlap (docs/events.md#secret-rotation), end to end: real capture, delivery engine and HTTPS
// receiver. After a rotation every delivery (first attempt, retry, test ping) is signed with
// the new secret and the old one until the overlap ends, then with the new one only; each
// request is checked as receivers check it, by standardwebhooks, svix, Stripe, the client's
// verifyWebhook and the service's own verify.
import type { IncomingHttpHeaders } from "node:http"
import { Webhook as StandardWebhook } from "standardwebhooks"
import Stripe from "stripe"
import { Webhook as SvixWebhook } from "svix"
import { describe, expect, it } from "vitest"
import { verifyWebhook } from "../../../client/src/index.ts"
import { endpointSecretContext } from "../../../src/platform/db/channels.ts"
import { decryptSecret } from "../../../src/platform/secrets/secrets-key.ts"
import { newSecret, verify } from "../../../src/webhooks/net/signature.ts"
import { listActivity } from "../../../src/access/activity.ts"
import { runSql } from "../../support/sql.ts"
import { getEndpoint, rotateEndpointSecret } from "../../../src/webhooks/endpoints/endpoints.ts"
import { testEndpoint } from "../../../src/webhooks/endpoints/ping.ts"
import { insertIncident } from "../../support/app.ts"
import type { RecordedRequest } from "../../support/https-receiver.ts"
import { addEndpoint, ADMIN, at, failure, startEngine, useEngineWorld, waitFor } from "../../support/world.ts"

const state = useEngineWorld()

const headersOf = (h: IncomingHttpHeaders): Record<string, string> =>
  Object.fromEntries(Object.entries(h).flatMap(([k, v]) => (typeof v === "string" ? [[k, v]] : [])))

const accepts = (check: () => unknown): boolean => {
  try {
    check()
    return true
  } catch {
    return false
  }
}

/** Whether each verifier accepts the request, as it arrived, with this secret. */
const verifiers = (req: RecordedRequest, secret: string) => {
  const body = req.body.toString("utf8")
  const headers = headersOf(req.headers)
  return {
    standardwebhooks: accepts(() => new StandardWebhook(secret.slice("whsec_".length)).verify(body, headers)),
    svix: accepts(() => new SvixWebhook(secret).verify(body, headers)),
    stripe: accepts(() => Stripe.webhooks.constructEvent(req.body, headers["service-signature"]!, secret)),
    client: accepts(() => verifyWebhook(req.body, headers, secret)),
    own: verify(headers["service-signature"]!, req.body, secret).ok
  }
}

const ALL = { standardwebhooks: true, svix: true, stripe: true, client: true, own: true }
const NONE = { standardwebhooks: false, svix: false, stripe: false, client: false, own: false }

/** The request verifies with exactly these secrets (every verifier agrees), and carries one signature per secret in each header. */
const signedWithExactly = (req: RecordedRequest, good: ReadonlyArray<string>, bad: ReadonlyArray<string>) => {
  const headers = headersOf(req.headers)
  const hex = Array.from({ length: good.length }, () => ",v1=[0-9a-f]{64}").join("")
  const b64 = Array.from({ length: good.length }, () => "v1,[A-Za-z0-9+/]{43}=").join(" ")
  expect(headers["service-signature"]).toMatch(new RegExp(`^t=\\d+${hex}$`))
  expect(headers["webhook-signature"]).toMatch(new RegExp(`^${b64}$`))
  for (const secret of good) expect(verifiers(req, secret), `verifies with ${secret}`).toEqual(ALL)
  for (const secret of [...bad, newSecret()]) expect(verifiers(req, secret), `refused with ${secret}`).toEqual(NONE)
}

const dbNow = async (): Promise<number> => (await state.w.db.sql<{ now: Date }[]>`select now()`)[0]!.now.getTime()

const stored = async (id: string) =>
  (
    await state.w.db.sql<
      {
        secret: Buffer
        previous_secret: Buffer | null
        previous_secret_expires_at: Date | null
        secret_rotated_at: Date | null
        updated_at: Date
      }[]
    >`
      select secret, previous_secret, previous_secret_expires_at, secret_rotated_at, updated_at from service.webhook_endpoints where id = ${id}`
  )[0]!

const endpoint = (path: string) => addEndpoint(state.w, path, { name: "Rotating" })

/** The nth request (1-based) at a path. */
const nth = (path: string, n: number, what: string) =>
  waitFor(() => at(state.w.receiver, path)[n - 1], `${what} (request ${n} at ${path})`)

describe("rotation with overlap", () => {
  it("by default the old secret signs beside the new one for 24 hours: a first attempt, its retry and a ping verify with either", async () => {
    const path = "/rotation/default"
    const e = await endpoint(path)
    const before = await dbNow()
    const rotated = await runSql(state.w.deps.sql, rotateEndpointSecret(state.w.deps, ADMIN, { id: e.id }))
    const after = await dbNow()
    expect(rotated.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/)
    expect(rotated.secret).not.toBe(e.secret)
    const until = Date.parse(rotated.previousSecretExpiresAt!)
    expect(until).toBeGreaterThanOrEqual(before + 86_400_000)
    expect(until).toBeLessThanOrEqual(after + 86_400_000)
    expect((await runSql(state.w.deps.sql, getEndpoint({ id: e.id }))).previousSecretExpiresAt).toBe(
      rotated.previousSecretExpiresAt
    )

    // The old secret is kept as it was stored: encrypted, bound to the endpoint.
    const row = await stored(e.id)
    expect(row.previous_secret!.toString("latin1")).not.toContain(e.secret.slice(6, 20))
    expect(decryptSecret(state.w.deps.secretsKey, row.previous_secret!, endpointSecretContext(e.id))).toBe(e.secret)
    expect(decryptSecret(state.w.deps.secretsKey, row.secret, endpointSecretContext(e.id))).toBe(rotated.secret)

    // The activity log says until when, never a secret.
    const [log] = (
      await runSql(state.w.deps.sql, listActivity({ companyId: state.w.company.id, kind: "endpoint.secret_rotated" }))
    ).filter((a) => a.subjectId === e.id)
    expect(log!.details).toEqual({ overlapSeconds: 86_400, previousSecretExpiresAt: rotated.previousSecretExpiresAt })
    expect(JSON.stringify(log)).not.toContain("whsec_")

    // The first attempt fails, so the retry is claimed again from the schedule.
    state.w.receiver.reply(path, { status: 503 })
    state.engine = await startEngine(state.w.deps, { retrySchedule: "300ms" })
    await insertIncident(state.w.db.sql, state.w.company.id)
    const first = await nth(path, 1, "the first attempt")
    state.w.receiver.reply(path, { status: 200 })
    const retry = await nth(path, 2, "the retry")
    expect(retry.headers["webhook-id"]).toBe(first.headers["webhook-id"])
    signedWithExactly(first, [rotated.secret, e.secret], [])
    signedWithExactly(retry, [rotated.secret, e.secret], [])
    // The new secret comes first.
    const [newHex, oldHex] = [...String(first.headers["service-signature"]).matchAll(/v1=([0-9a-f]{64})/g)].map(
      (m) => m[1]
    )
    expect(verify(`t=${first.headers["webhook-timestamp"]},v1=${newHex}`, first.body, rotated.secret).ok).toBe(true)
    expect(verify(`t=${first.headers["webhook-timestamp"]},v1=${oldHex}`, first.body, e.secret).ok).toBe(true)

    const ping = await runSql(state.w.deps.sql, testEndpoint(state.w.deps, ADMIN, { id: e.id }))
    expect(ping.ok).toBe(true)
    signedWithExactly(await nth(path, 3, "the ping"), [rotated.secret, e.secret], [])
  })

  it("rotating again during an overlap keeps only the secret being replaced; once a short overlap ends only the new secret signs", async () => {
    const path = "/rotation/again"
    const a = await endpoint(path)
    const b = await runSql(state.w.deps.sql, rotateEndpointSecret(state.w.deps, ADMIN, { id: a.id }))
    const c = await runSql(state.w.deps.sql, rotateEndpointSecret(state.w.deps, ADMIN, { id: a.id, overlap: "24h" }))
    state.engine = await startEngine(state.w.deps)
    await insertIncident(state.w.db.sql, state.w.company.id)
    signedWithExactly(await nth(path, 1, "the delivery after two rotations"), [c.secret, b.secret], [a.secret])

    const d = await runSql(state.w.deps.sql, rotateEndpointSecret(state.w.deps, ADMIN, { id: a.id, overlap: "2s" }))
    const until = Date.parse(d.previousSecretExpiresAt!)
    const now = await dbNow()
    expect(until).toBeGreaterThan(now)
    expect(until).toBeLessThanOrEqual(now + 2_000)
    // The database's clock decides, as it set the end.
    await waitFor(async () => (await dbNow()) > until, "the overlap to end", 10_000)
    expect((await runSql(state.w.deps.sql, getEndpoint({ id: a.id }))).previousSecretExpiresAt).toBeNull()
    await insertIncident(state.w.db.sql, state.w.company.id)
    signedWithExactly(await nth(path, 2, "the delivery after the overlap"), [d.secret], [c.secret, b.secret, a.secret])
    await runSql(state.w.deps.sql, testEndpoint(state.w.deps, ADMIN, { id: a.id }))
    signedWithExactly(await nth(path, 3, "the ping after the overlap"), [d.secret], [c.secret])
  })

  it("overlap 0: only the new secret signs, at once, even when an overlap was running", async () => {
    const path = "/rotation/none"
    const a = await endpoint(path)
    const b = await runSql(state.w.deps.sql, rotateEndpointSecret(state.w.deps, ADMIN, { id: a.id, overlap: "0" }))
    expect(b.previousSecretExpiresAt).toBeNull()
    expect(await stored(a.id)).toMatchObject({ previous_secret: null, previous_secret_expires_at: null })
    state.engine = await startEngine(state.w.deps)
    await insertIncident(state.w.db.sql, state.w.company.id)
    signedWithExactly(await nth(path, 1, "the delivery"), [b.secret], [a.secret])

    const c = await runSql(state.w.deps.sql, rotateEndpointSecret(state.w.deps, ADMIN, { id: a.id, overlap: "7d" }))
    expect(Date.parse(c.previousSecretExpiresAt!)).toBeGreaterThan((await dbNow()) + 7 * 86_400_000 - 60_000)
    const d = await runSql(state.w.deps.sql, rotateEndpointSecret(state.w.deps, ADMIN, { id: a.id, overlap: "0" }))
    expect(d.previousSecretExpiresAt).toBeNull()
    expect(await stored(a.id)).toMatchObject({ previous_secret: null, previous_secret_expires_at: null })
    expect((await runSql(state.w.deps.sql, getEndpoint({ id: a.id }))).previousSecretExpiresAt).toBeNull()
    await insertIncident(state.w.db.sql, state.w.company.id)
    signedWithExactly(
      await nth(path, 2, "the delivery after cutting the overlap short"),
      [d.secret],
      [c.secret, b.secret, a.secret]
    )
    const logs = (
      await runSql(state.w.deps.sql, listActivity({ companyId: state.w.company.id, kind: "endpoint.secret_rotated" }))
    ).filter((x) => x.subjectId === a.id)
    expect(logs.map((x) => x.details)).toEqual([
      { overlapSeconds: 0, previousSecretExpiresAt: null },
      { overlapSeconds: 604_800, previousSecretExpiresAt: c.previousSecretExpiresAt },
      { overlapSeconds: 0, previousSecretExpiresAt: null }
    ])
  })

  it.each([
    ["8d", /^overlap may be at most 7d \(168h\)/],
    ["604801s", /^overlap may be at most 7d/],
    [
      "soon",
      /^overlap must be a duration such as 24h, 90m, 7d, 3600s or 1h30m, or 0 for none \(at most 7d\); got "soon"$/
    ],
    ["-1h", /^overlap must be a duration/],
    ["3600", /^overlap must be a duration/],
    ["", /^overlap must be a duration/]
  ])("a bad overlap %j is refused with 400 and changes nothing", async (overlap, message) => {
    const e = await endpoint("/rotation/refused")
    const rotated = await runSql(state.w.deps.sql, rotateEndpointSecret(state.w.deps, ADMIN, { id: e.id }))
    const before = await stored(e.id)
    const activity = async () =>
      (await state.w.db.sql<{ n: number }[]>`select count(*)::int as n from service.activity`)[0]!.n
    const logged = await activity()
    const error = await failure(
      runSql(state.w.deps.sql, rotateEndpointSecret(state.w.deps, ADMIN, { id: e.id, overlap }))
    )
    expect(error.status).toBe(400)
    expect(error.message).toMatch(message)
    expect(await stored(e.id)).toEqual(before)
    expect(decryptSecret(state.w.deps.secretsKey, before.secret, endpointSecretContext(e.id))).toBe(rotated.secret)
    expect(await activity()).toBe(logged)
  })
})
