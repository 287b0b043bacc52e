import { beforeAll, describe, expect, it } from "vitest"
import { createEndpoint } from "../../../src/webhooks/endpoints/endpoints.ts"
import { createHook } from "../../../src/webhooks/subscriptions/hooks.ts"
import { makeToken, request } from "../../support/http.ts"
import { insertIncident } from "../../support/app.ts"
import { createCompany, type TestCompany } from "../../support/views.ts"
import { at, makeKey, sleep, useServiceWorld, waitFor } from "../../support/world.ts"
import { runCli } from "../../support/cli.ts"
import { webClient, type WebClient } from "../../support/pages.ts"
import { runSql } from "../../support/sql.ts"

type Body = { readonly id: string; readonly data: { readonly id: string } }

/** The value of an input (or the href of a link) the page has, by a pattern around it. */
const grab = (page: string, re: RegExp): string => {
  const m = re.exec(page)
  if (m === null) throw new Error(`${re} not in the page:\n${page.slice(0, 3000)}`)
  return m[1]!.replaceAll("&amp;", "&")
}

describe("admin pages: the failing warning, the switch-off, Turn On's replay offer, replays", () => {
  let acme: TestCompany
  const { db, cap, receiver, deps, server } = useServiceWorld({
    seed: async (sql) => {
      acme = await createCompany(sql, { name: "Acme Safety", mirrored: false })
    },
    pages: true,
    // One attempt per delivery: each failure is a delivery that failed every attempt.
    engine: { retrySchedule: "", replayRate: 20 }
  })
  let client: WebClient
  let endpointId: string
  const path = "/flaky"
  const failedIncidents: Array<string> = []
  const missedWhileOff: Array<string> = []

  const endpoint = async () =>
    (
      await db.sql<{ enabled: boolean; consecutive_failures: number; disabled_reason: string | null }[]>`
      select enabled, consecutive_failures, disabled_reason from service.webhook_endpoints where id = ${endpointId}`
    )[0]!

  const activity = async () =>
    db.sql<{ kind: string; actor_email: string | null; details: Record<string, unknown> }[]>`
      select kind, actor_email, details from service.activity where subject_id = ${endpointId} order by at, id`

  const fail = async (n: number) => {
    for (let i = 0; i < n; i++)
      failedIncidents.push(await insertIncident(db.sql, acme.id, { title: `Failing ${failedIncidents.length}` }))
    const want = failedIncidents.length
    await waitFor(
      async () => (await endpoint()).consecutive_failures >= want || !(await endpoint()).enabled,
      `${want} failures in a row`
    )
  }

  beforeAll(async () => {
    const { token } = await makeToken(db, acme, "web replays")
    client = webClient(server.url)
    expect((await client.signIn(token)).status).toBe(303)
    receiver.reply(path, { status: 503, body: "down for maintenance" })
    endpointId = (
      await runSql(
        deps.sql,
        createEndpoint(
          deps,
          { kind: "user", id: acme.adminId, email: acme.adminEmail },
          {
            companyId: acme.id,
            name: "Flaky",
            url: receiver.url(path),
            events: ["incident.created"]
          }
        )
      )
    ).id
  })

  it("warns at ten deliveries in a row that failed every attempt: on the pages, and once in the activity log", async () => {
    await fail(9)
    expect((await activity()).map((a) => a.kind)).not.toContain("endpoint.failing")
    expect((await client.get(`/admin/webhooks/endpoints/${endpointId}`)).text).not.toContain("This endpoint is failing")
    await fail(1)
    const page = await client.get(`/admin/webhooks/endpoints/${endpointId}`)
    expect(page.status).toBe(200)
    expect(page.text).toContain('<h2 id="failing-title">This endpoint is failing</h2>')
    expect(page.text).toContain("10 deliveries in a row failed every attempt. At 15 it is switched off")
    const list = await client.get("/admin/webhooks")
    expect(list.text).toMatch(
      /<span class="state failing">Failing<\/span> <span class="muted">10 failed in a row; 15 switch it off<\/span>/
    )
    const warned = (await activity()).filter((a) => a.kind === "endpoint.failing")
    expect(warned).toHaveLength(1)
    expect(warned[0]).toMatchObject({
      actor_email: null,
      details: { consecutiveFailures: 10, switchOffAt: 15, lastStatus: 503, lastError: "http 503", by: "service" }
    })
    // Once per streak: more failures do not warn again.
    await fail(2)
    expect((await activity()).filter((a) => a.kind === "endpoint.failing")).toHaveLength(1)
    const log = await client.get("/admin/activity?kind=endpoint.failing")
    expect(log.text).toContain("<code>endpoint.failing</code>")
  })

  it("switches off at fifteen with the reason in the activity log; events while off get no delivery", async () => {
    await fail(3)
    await waitFor(async () => !(await endpoint()).enabled, "the switch-off")
    const e = await endpoint()
    expect(e.disabled_reason).toBe("15 deliveries in a row failed every attempt; last error: http 503")
    const kinds = (await activity()).map((a) => a.kind)
    expect(kinds.filter((k) => k === "endpoint.failing" || k === "endpoint.switched_off")).toEqual([
      "endpoint.failing",
      "endpoint.switched_off"
    ])
    const off = (await activity()).find((a) => a.kind === "endpoint.switched_off")!
    expect(off.details).toEqual({
      reason: "15 deliveries in a row failed every attempt; last error: http 503",
      by: "service"
    })
    const page = await client.get(`/admin/webhooks/endpoints/${endpointId}`)
    expect(page.text).toContain("This endpoint is switched off")
    expect(page.text).not.toContain("This endpoint is failing")
    expect(at(receiver, path)).toHaveLength(15)
    for (let i = 0; i < 2; i++) missedWhileOff.push(await insertIncident(db.sql, acme.id, { title: `Missed ${i}` }))
    await cap.settle()
    await sleep(500)
    expect(at(receiver, path)).toHaveLength(15)
  })

  it("Turn On offers to replay what failed while it was off; the offer's dry run counts it, the replay sends it", async () => {
    receiver.reply(path, { status: 200 })
    const page = await client.get(`/admin/webhooks/endpoints/${endpointId}`)
    const turnedOn = await client.post(`/admin/webhooks/endpoints/${endpointId}/enable`, {})
    expect(turnedOn.status).toBe(303)
    expect(page.status).toBe(200)
    const [enabled] = (await activity()).filter((a) => a.kind === "endpoint.enabled")
    expect(enabled!.details).toMatchObject({
      previousReason: "15 deliveries in a row failed every attempt; last error: http 503",
      replayWhatFailed: { since: expect.any(String), until: expect.any(String) }
    })

    // The offer, on the endpoint's page: a link to the replay form, failed only, the window it was off.
    const shown = await client.get(`/admin/webhooks/endpoints/${endpointId}`)
    expect(shown.text).toContain('<h2 id="offer-title">Send what it missed?</h2>')
    const link = grab(shown.text, /<a href="([^"]+)">Replay what failed while it was off<\/a>/)
    const offered = new URL(link, server.url)
    expect(offered.pathname).toBe(`/admin/webhooks/endpoints/${endpointId}/replay`)
    expect(offered.searchParams.get("failed")).toBe("1")
    const details = enabled!.details.replayWhatFailed as { since: string; until: string }
    expect([offered.searchParams.get("since"), offered.searchParams.get("until")]).toEqual([
      details.since,
      details.until
    ])

    // The form, prefilled.
    const form = await client.get(offered.pathname + offered.search)
    expect(form.status).toBe(200)
    expect(grab(form.text, /id="replay-since" name="since" value="([^"]*)"/)).toBe(details.since)
    expect(grab(form.text, /id="replay-until" name="until" value="([^"]*)"/)).toBe(details.until)
    expect(form.text).toMatch(/id="replay-failed" name="failed" value="1" checked>/)

    // A mistake is shown on the form, and nothing is made.
    const bad = await client.post(offered.pathname, { step: "check", since: "yesterday", until: "", failed: "1" })
    expect(bad.status).toBe(400)
    expect(bad.text).toMatch(/<p class="form-error" role="alert" id="replay-form-error">since must be /)

    // The dry run: 15 failed with their ids, 2 missed while off; nothing sent, nothing stored.
    const check = await client.post(offered.pathname, {
      step: "check",
      since: details.since,
      until: details.until,
      failed: "1"
    })
    expect(check.status).toBe(200)
    expect(check.text).toContain('<h2 id="plan-title">17 deliveries to send</h2>')
    expect(check.text).toContain('<dd data-count="resend">15 with their original delivery ids</dd>')
    expect(check.text).toContain('<dd data-count="create">2 events the endpoint never had a delivery for</dd>')
    expect(check.text).toContain(receiver.url(path))
    await sleep(300)
    expect(at(receiver, path)).toHaveLength(15)
    expect(await db.sql`select 1 from service.webhook_replays`).toHaveLength(0)

    // Start: the replay's page, with its progress; the receiver gets exactly what it missed.
    const hidden = (name: string) =>
      grab(check.text, new RegExp(`<input type="hidden" name="${name}" value="([^"]*)">`))
    const started = await client.post(offered.pathname, {
      step: "start",
      since: hidden("since"),
      until: hidden("until"),
      failed: hidden("failed")
    })
    expect(started.status).toBe(303)
    const replayPath = started.headers.get("location")!
    expect(replayPath).toMatch(/^\/admin\/webhooks\/replays\/[0-9a-f-]{36}$/)
    const progress = await client.get(replayPath)
    expect(progress.status).toBe(200)
    expect(progress.text).toContain("Replay started: 17 deliveries to")
    expect(progress.text).toContain('<dd data-count="queued">17</dd>')
    await waitFor(
      async () => (await client.get(replayPath)).text.includes('<span class="state finished">finished</span>'),
      "the replay to finish"
    )
    const done = await client.get(replayPath)
    expect(done.text).toContain('<dd data-count="sent">17</dd>')
    expect(done.text).toContain('<dd data-count="remaining">0</dd>')
    expect(done.text).not.toContain("Cancel replay")
    const replayed = at(receiver, path)
      .slice(15)
      .map((r) => JSON.parse(r.body.toString("utf8")) as Body)
    expect(replayed.map((b) => b.data.id).sort()).toEqual([...failedIncidents, ...missedWhileOff].sort())
    const [log] = await db.sql<{ actor_email: string | null; details: Record<string, unknown> }[]>`
      select actor_email, details from service.activity where kind = 'deliveries.replayed' and subject_id = ${endpointId}`
    expect(log).toMatchObject({ actor_email: acme.adminEmail, details: { failedOnly: true, resent: 15, created: 2 } })

    // The offer is gone once a replay was made; the endpoint's page lists the replay.
    const after = await client.get(`/admin/webhooks/endpoints/${endpointId}`)
    expect(after.text).not.toContain("Send what it missed?")
    expect(after.text).toContain(`href="${replayPath}"`)
  })

  it("a replay to a switched-off endpoint waits, shown on its page; Cancel from the page puts everything back", async () => {
    await db.sql`update service.webhook_endpoints set enabled = false, disabled_reason = 'by hand', disabled_at = now() where id = ${endpointId}`
    const form = await client.get(`/admin/webhooks/endpoints/${endpointId}/replay`)
    expect(form.text).toContain("The endpoint is switched off.")
    const started = await client.post(`/admin/webhooks/endpoints/${endpointId}/replay`, { step: "start" })
    expect(started.status).toBe(303)
    const replayPath = started.headers.get("location")!
    await sleep(600)
    const waiting = await client.get(replayPath)
    expect(waiting.text).toContain(
      "<strong>Waiting:</strong> the endpoint is switched off: it goes on once it is turned on"
    )
    expect(waiting.text).toContain('<dd data-count="sent">0</dd>')
    // `status` lists it, with why it waits
    const status = await runCli(["status"], { DATABASE_URL: db.url })
    expect(status.stdout).toContain("Replays running: 1")
    expect(status.stdout).toMatch(
      new RegExp(`${replayPath.split("/").pop()} +endpoint ${endpointId} +0 +\\d+ +\\d+ .*the endpoint is switched off`)
    )
    const json = JSON.parse((await runCli(["status", "--json"], { DATABASE_URL: db.url })).stdout) as {
      replays: Array<Record<string, unknown>>
    }
    expect(json.replays).toEqual([
      expect.objectContaining({
        id: replayPath.split("/").pop(),
        state: "running",
        waiting: "the endpoint is switched off: it goes on once it is turned on"
      })
    ])
    const before = at(receiver, path).length
    const cancelled = await client.post(`${replayPath}/cancel`, {})
    expect(cancelled.status).toBe(303)
    const page = await client.get(replayPath)
    expect(page.text).toContain('<span class="state cancelled">cancelled</span>')
    expect(page.text).toMatch(/Replay cancelled: 0 sent, \d+ not sent\./)
    await db.sql`update service.webhook_endpoints set enabled = true, disabled_reason = null, disabled_at = null where id = ${endpointId}`
    await sleep(600)
    expect(at(receiver, path)).toHaveLength(before)
    const states = await db.sql<
      { state: string }[]
    >`select distinct state from service.webhook_deliveries where endpoint_id = ${endpointId}`
    expect(states.map((s) => s.state)).toEqual(["succeeded"])
    // A replay that is not the company's, or not a replay at all, is not found.
    expect((await client.get("/admin/webhooks/replays/00000000-0000-4000-8000-000000000000")).status).toBe(404)
    expect((await request(server.url, "/admin/webhooks/replays/nope")).status).toBe(303) // signed out: to sign-in
  })

  it("a subscription's replay from the webhooks page: its Replay link, the count, the start", async () => {
    const keyId = await makeKey(db.sql, acme.id, { scopes: ["incidents"], webhooks: true })
    const { subscription } = await runSql(
      deps.sql,
      createHook(deps, { keyId, companyId: acme.id }, { url: receiver.url("/sub"), event: "incident.created" })
    )
    const ids = [await insertIncident(db.sql, acme.id), await insertIncident(db.sql, acme.id)]
    await waitFor(
      async () =>
        (
          await db.sql`select 1 from service.webhook_deliveries where subscription_id = ${subscription.id} and state = 'succeeded'`
        ).length === 2,
      "2 delivered"
    )
    const list = await client.get("/admin/webhooks")
    const link = `/admin/webhooks/subscriptions/${subscription.id}/replay`
    expect(list.text).toContain(
      `<a href="${link}" aria-label="Replay incident.created to ${receiver.url("/sub")}">Replay</a>`
    )
    const form = await client.get(link)
    expect(form.status).toBe(200)
    expect(form.text).toContain("Replay to subscription to incident.created")
    const check = await client.post(link, { step: "check" })
    expect(check.text).toContain('<h2 id="plan-title">2 deliveries to send</h2>')
    const started = await client.post(link, {
      step: "start",
      since: grab(check.text, /name="since" value="([^"]*)"/),
      until: grab(check.text, /name="until" value="([^"]*)"/)
    })
    expect(started.status).toBe(303)
    await waitFor(
      async () =>
        (await client.get(started.headers.get("location")!)).text.includes(
          '<span class="state finished">finished</span>'
        ),
      "the replay to finish"
    )
    const bodies = at(receiver, "/sub").map((r) => JSON.parse(r.body.toString("utf8")) as Body)
    expect(
      bodies
        .slice(2)
        .map((b) => b.data.id)
        .sort()
    ).toEqual([...ids].sort())
    expect(
      bodies
        .slice(2)
        .map((b) => b.id)
        .sort()
    ).toEqual(
      bodies
        .slice(0, 2)
        .map((b) => b.id)
        .sort()
    )
    // the webhooks page lists it among the company's replays
    expect((await client.get("/admin/webhooks")).text).toContain(`href="${started.headers.get("location")}"`)
    expect(
      (await client.get(`/admin/webhooks/subscriptions/${"0".repeat(8)}-0000-4000-8000-000000000000/replay`)).status
    ).toBe(404)
  })
})
