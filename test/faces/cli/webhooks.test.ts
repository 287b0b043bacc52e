// The webhook commands of the admin CLI as a person or a script runs them: the real
// `node src/faces/cli/admin.ts` against the test database, a real HTTPS receiver on loopback
// (trusted through NODE_EXTRA_CA_CERTS, allowed through WEBHOOK_ALLOWED_NETWORKS) and a
// delivery engine sharing the CLI's SECRETS_KEY.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { insertIncident } from "../../support/app.ts"
import { addHook, at, makeKey, startEngine, useWorld, waitFor, type RunningEngine } from "../../support/world.ts"
import { runCli } from "../../support/cli.ts"

describe("admin CLI: webhooks", () => {
  const w = useWorld()
  let engine: RunningEngine
  let env: Record<string, string>
  let dir: string
  let admin: string
  let endpointId: string
  const cli = (...args: Array<string>) => runCli(args, env)
  /** `endpoints create` for a company, by name, at `url` for `events`, as the admin, with `more` flags. */
  const createEndpointCli = (company: string, name: string, url: string, events: string, ...more: Array<string>) =>
    cli(
      "endpoints",
      "create",
      "--company",
      company,
      "--name",
      name,
      "--url",
      url,
      "--events",
      events,
      "--as",
      admin,
      ...more
    )

  beforeAll(async () => {
    admin = `admin.${w.company.host}@example.test`
    await w.db
      .sql`insert into app.users (company_id, name, email, role) values (${w.company.id}, 'Ada Admin', ${admin}, 'admin')`
    dir = mkdtempSync(join(tmpdir(), "srs-cli-webhooks-"))
    writeFileSync(join(dir, "ca.pem"), w.receiver.ca)
    env = {
      DATABASE_URL: w.db.url,
      SECRETS_KEY: Buffer.from(w.deps.secretsKey).toString("base64"),
      WEBHOOK_ALLOWED_NETWORKS: "127.0.0.0/8",
      NODE_EXTRA_CA_CERTS: join(dir, "ca.pem"),
      DATA_DIR: dir
    }
    engine = await startEngine(w.deps)
  })
  afterAll(async () => {
    await engine?.stop()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  it("endpoints create --json prints exactly {id, secret}; the text form shows the secret once", async () => {
    w.receiver.reply("/cli", { status: 200, body: "thanks from the receiver" })
    const r = await createEndpointCli(
      w.company.host,
      "Ops",
      w.receiver.url("/cli"),
      "incident.created,permit.approved",
      "--json"
    )
    expect(r.stderr).toBe("")
    expect(r.code).toBe(0)
    const answer = JSON.parse(r.stdout)
    expect(Object.keys(answer)).toEqual(["id", "secret"])
    expect(answer.secret).toMatch(/^whsec_/)
    endpointId = answer.id
    const list = await cli("endpoints", "list", "--company", w.company.host, "--json")
    expect(list.code).toBe(0)
    expect(list.stdout).not.toContain(answer.secret)
    expect(JSON.parse(list.stdout)).toEqual([
      expect.objectContaining({
        id: endpointId,
        name: "Ops",
        events: ["incident.created", "permit.approved"],
        enabled: true
      })
    ])
    const text = await createEndpointCli(w.company.id, "Second", w.receiver.url("/second"), "audit.created")
    expect(text.code).toBe(0)
    expect(text.stdout).toMatch(/Created webhook endpoint "Second"/)
    expect(text.stdout).toMatch(/whsec_\S+/)
  })

  it("endpoints test shows the receiver's status, time and the start of its answer", async () => {
    const r = await cli("endpoints", "test", endpointId, "--as", admin, "--json")
    expect(r.code).toBe(0)
    const ping = JSON.parse(r.stdout)
    expect(ping).toMatchObject({ ok: true, status: 200, error: null, response: "thanks from the receiver" })
    expect(typeof ping.durationMs).toBe("number")
    expect(at(w.receiver, "/cli").at(-1)!.headers["service-event"]).toBe("ping")
    const text = await cli("endpoints", "test", endpointId, "--as", admin)
    expect(text.code).toBe(0)
    expect(text.stdout).toContain("HTTP 200")
    expect(text.stdout).toContain("thanks from the receiver")
  })

  it("endpoints test exits 1 when the receiver does not accept the ping, after printing its answer", async () => {
    w.receiver.reply("/cli-down", { status: 503, body: "down for maintenance" })
    const made = await createEndpointCli(w.company.host, "Down", w.receiver.url("/cli-down"), "audit.created", "--json")
    expect(made.code).toBe(0)
    const { id } = JSON.parse(made.stdout)
    const r = await cli("endpoints", "test", id, "--as", admin, "--json")
    expect(r.code).toBe(1)
    expect(JSON.parse(r.stdout)).toMatchObject({
      ok: false,
      status: 503,
      error: "http 503",
      response: "down for maintenance"
    })
    expect(r.stderr).toBe("error: the receiver did not accept the test event (http 503)\n")
    const text = await cli("endpoints", "test", id, "--as", admin)
    expect(text.code).toBe(1)
    expect(text.stdout).toContain("The test event failed")
    expect(text.stdout).toContain("down for maintenance")
    expect((await cli("endpoints", "delete", id, "--as", admin)).code).toBe(0)
  })

  it("endpoints deliveries lists status, attempts and times; deliveries resend sends the same id again", async () => {
    await insertIncident(w.db.sql, w.company.id)
    await waitFor(
      () => at(w.receiver, "/cli").some((q) => q.headers["service-event"] === "incident.created"),
      "a delivery"
    )
    const r = await waitFor(async () => {
      const x = await cli("endpoints", "deliveries", endpointId, "--json")
      const rows = JSON.parse(x.stdout)
      return rows.length === 1 && rows[0].state === "succeeded" ? rows : undefined
    }, "a succeeded delivery in the log")
    expect(r[0]).toMatchObject({
      event: "incident.created",
      state: "succeeded",
      attempts: 1,
      lastStatus: 200,
      lastError: null,
      endpointId
    })
    for (const field of ["createdAt", "lastAttemptAt", "finishedAt"]) expect(typeof r[0][field]).toBe("string")
    const text = await cli("endpoints", "deliveries", endpointId, "--as", admin)
    expect(text.code).toBe(0)
    for (const column of ["STATUS OR ERROR", "ATTEMPTS", "CREATED", "LAST ATTEMPT"])
      expect(text.stdout).toContain(column)
    expect(text.stdout).toContain("HTTP 200")

    const resend = await cli("deliveries", "resend", r[0].id, "--as", admin, "--json")
    expect(resend.code).toBe(0)
    expect(JSON.parse(resend.stdout).id).toBe(r[0].id)
    await waitFor(
      () => at(w.receiver, "/cli").filter((q) => q.headers["service-delivery"] === r[0].id).length === 2,
      "the resent delivery"
    )
  })

  it("endpoints enable turns a switched-off endpoint on; update and rotate-secret", async () => {
    await w.db
      .sql`update service.webhook_endpoints set enabled = false, disabled_reason = 'test', disabled_at = now() where id = ${endpointId}`
    const r = await cli("endpoints", "enable", endpointId, "--as", admin, "--json")
    expect(r.code).toBe(0)
    expect(JSON.parse(r.stdout)).toMatchObject({
      id: endpointId,
      enabled: true,
      disabledReason: null,
      replayWhatFailed: { endpointId, failedOnly: true }
    })
    const u = await cli("endpoints", "update", endpointId, "--name", "Ops 2", "--as", admin, "--json")
    expect(u.code).toBe(0)
    expect(JSON.parse(u.stdout)).toMatchObject({ name: "Ops 2", url: w.receiver.url("/cli") })
    const rot = await cli("endpoints", "rotate-secret", endpointId, "--as", admin, "--json")
    expect(rot.code).toBe(0)
    const rotated = JSON.parse(rot.stdout)
    expect(rotated).toEqual({
      id: endpointId,
      secret: expect.stringMatching(/^whsec_/),
      previousSecretExpiresAt: expect.any(String)
    })
    // The default overlap: a day, by the database's clock.
    const [{ now }] = await w.db.sql<[{ now: Date }]>`select now()`
    expect(Math.abs(Date.parse(rotated.previousSecretExpiresAt) - (now.getTime() + 86_400_000))).toBeLessThan(60_000)
  })

  it("endpoints rotate-secret --overlap: says until when the old secret signs; 0 for none; a bad duration exits 1 and changes nothing", async () => {
    const help = await cli("endpoints", "rotate-secret", "--help")
    expect(help.code).toBe(0)
    expect(help.stdout).toContain("--overlap")
    expect(help.stdout).toMatch(/24h \(the default\), 90m, 7d \(the most\), 3600s, 1h30m, or 0 for none/)

    const text = await cli("endpoints", "rotate-secret", endpointId, "--overlap", "90m", "--as", admin)
    expect(text.code).toBe(0)
    const secret = /whsec_\S+/.exec(text.stdout)![0]
    const [{ until }] = await w.db.sql<
      [{ until: Date }]
    >`select previous_secret_expires_at as until from service.webhook_endpoints where id = ${endpointId}`
    expect(text.stdout).toContain(`New signing secret of endpoint ${endpointId}`)
    expect(text.stdout).toContain(
      `Until ${until
        .toISOString()
        .replace("T", " ")
        .replace(/\.\d{3}Z$/, "Z")} they are signed with the old secret too`
    )
    const [{ minutes }] = await w.db.sql<
      [{ minutes: number }]
    >`select round(extract(epoch from previous_secret_expires_at - secret_rotated_at) / 60)::int as minutes
      from service.webhook_endpoints where id = ${endpointId}`
    expect(minutes).toBe(90)

    const before = await w.db
      .sql`select secret, previous_secret, previous_secret_expires_at, secret_rotated_at from service.webhook_endpoints where id = ${endpointId}`
    for (const [overlap, message] of [
      ["8d", 'error: overlap may be at most 7d (168h): the old secret signs for a week at the most; got "8d"\n'],
      [
        "a while",
        'error: overlap must be a duration such as 24h, 90m, 7d, 3600s or 1h30m, or 0 for none (at most 7d); got "a while"\n'
      ]
    ] as const) {
      const bad = await cli("endpoints", "rotate-secret", endpointId, "--overlap", overlap, "--as", admin, "--json")
      expect(bad.code, overlap).toBe(1)
      expect(bad.stderr, overlap).toBe(message)
      expect(bad.stdout, overlap).toBe("")
    }
    expect(
      await w.db
        .sql`select secret, previous_secret, previous_secret_expires_at, secret_rotated_at from service.webhook_endpoints where id = ${endpointId}`
    ).toEqual(before)

    const none = await cli("endpoints", "rotate-secret", endpointId, "--overlap", "0", "--as", admin)
    expect(none.code).toBe(0)
    expect(none.stdout).toContain("The old secret no longer signs anything.")
    expect(/whsec_\S+/.exec(none.stdout)![0]).not.toBe(secret)
    expect(
      await w.db
        .sql`select previous_secret, previous_secret_expires_at from service.webhook_endpoints where id = ${endpointId}`
    ).toEqual([{ previous_secret: null, previous_secret_expires_at: null }])
  })

  it("--rate-limit and --ordering on create and update; list shows them and the circuit; bad values exit 1 and change nothing", async () => {
    const made = await createEndpointCli(
      w.company.host,
      "Paced",
      w.receiver.url("/cli-paced"),
      "incident.created",
      "--rate-limit",
      "2.5",
      "--ordering",
      "record"
    )
    expect(made.stderr).toBe("")
    expect(made.code).toBe(0)
    expect(made.stdout).toMatch(/^ {2}rate: {5}at most 2\.5 a second$/m)
    expect(made.stdout).toMatch(/^ {2}ordering: by record$/m)
    expect(made.stdout).toMatch(/^ {2}circuit: {2}closed$/m)
    const id = /\(([0-9a-f-]{36})\)/.exec(made.stdout)![1]!
    const shown = async () =>
      (
        JSON.parse((await cli("endpoints", "list", "--company", w.company.host, "--json")).stdout) as Array<{
          id: string
          rateLimit: number | null
          ordering: string
          circuit: { state: string }
        }>
      ).find((e) => e.id === id)!
    expect(await shown()).toMatchObject({ rateLimit: 2.5, ordering: "record", circuit: { state: "closed" } })

    for (const [flag, value, message] of [
      ["--rate-limit", "fast", /^error: --rate-limit must be a number of deliveries per second from 0\.01 to 1000/m],
      ["--rate-limit", "0", /^error: --rate-limit must be/m],
      ["--rate-limit", "5000", /^error: --rate-limit must be/m],
      ["--ordering", "fifo", /^error: --ordering must be "record"/m]
    ] as const) {
      const bad = await cli("endpoints", "update", id, flag, value, "--as", admin)
      expect(bad.code, `${flag} ${value}`).toBe(1)
      expect(bad.stderr).toMatch(message)
    }
    expect(await shown()).toMatchObject({ rateLimit: 2.5, ordering: "record" })

    const cleared = await cli(
      "endpoints",
      "update",
      id,
      "--rate-limit",
      "none",
      "--ordering",
      "none",
      "--as",
      admin,
      "--json"
    )
    expect(cleared.code).toBe(0)
    expect(JSON.parse(cleared.stdout)).toMatchObject({ rateLimit: null, ordering: "none" })

    await w.db.sql`
      insert into service.webhook_circuits (endpoint_id, company_id, state, failures, opened_at, probe_at)
      values (${id}, ${w.company.id}, 'open', 5, '2026-03-04T05:06:07.089Z', '2026-03-04T05:06:17.089Z')`
    const table = await cli("endpoints", "list", "--company", w.company.host)
    expect(table.stdout).toMatch(/open, next probe 2026-03-04 05:06:17Z/)
    await cli("endpoints", "delete", id, "--as", admin)
  })

  it("subscriptions list, disable and delete those keys made through the API", async () => {
    const keyId = await makeKey(w.db.sql, w.company.id, { webhooks: true })
    const made = await addHook(w, "/sub", { keyId })
    const id = made.subscription.id
    const list = await cli("subscriptions", "list", "--company", w.company.host, "--json")
    expect(list.code).toBe(0)
    expect(JSON.parse(list.stdout)).toEqual([
      expect.objectContaining({ id, keyId, event: "incident.created", active: true })
    ])
    const off = await cli("subscriptions", "disable", id, "--as", admin, "--json")
    expect(off.code).toBe(0)
    expect(JSON.parse(off.stdout)).toMatchObject({ id, active: false })
    const del = await cli("subscriptions", "delete", id, "--as", admin)
    expect(del.code).toBe(0)
    expect(del.stdout).toContain(`Deleted subscription ${id}`)
    expect(JSON.parse((await cli("subscriptions", "list", "--company", w.company.host, "--json")).stdout)).toEqual([])
    const again = await cli("subscriptions", "delete", id, "--as", admin)
    expect(again.code).toBe(1)
    expect(again.stderr).toContain("no subscription")
  })

  it("activity lists every change, who made it, and filters by --kind", async () => {
    const r = await cli("activity", "--company", w.company.host, "--json")
    expect(r.code).toBe(0)
    const kinds = JSON.parse(r.stdout).map((e: { kind: string }) => e.kind)
    for (const k of [
      "endpoint.created",
      "endpoint.tested",
      "endpoint.enabled",
      "endpoint.updated",
      "endpoint.secret_rotated",
      "delivery.resent",
      "subscription.disabled",
      "subscription.deleted"
    ]) {
      expect(
        kinds.some((x: string) => x === k || x.startsWith(k)),
        `${k} in ${kinds.join(",")}`
      ).toBe(true)
    }
    const created = JSON.parse(r.stdout).find((e: { kind: string }) => e.kind === "endpoint.created")
    expect(created.actorEmail).toBe(admin)
    const only = await cli("activity", "--company", w.company.host, "--kind", "subscription", "--json")
    expect(only.code).toBe(0)
    const onlyKinds = JSON.parse(only.stdout).map((e: { kind: string }) => e.kind)
    expect(onlyKinds.length).toBeGreaterThan(0)
    expect(onlyKinds.every((k: string) => k.startsWith("subscription."))).toBe(true)
    const text = await cli("activity", "--company", w.company.host)
    expect(text.code).toBe(0)
    expect(text.stdout).toContain("endpoint.created")
  })

  it("refuses bad input with a message and a non-zero exit", async () => {
    const flag = await cli("endpoints", "create", "--company", w.company.host, "--bogus", "x")
    expect(flag.code).toBe(2)
    expect(flag.stderr).toContain("--bogus")
    const noAs = await cli("endpoints", "delete", endpointId)
    expect(noAs.code).not.toBe(0)
    expect(noAs.stderr).toMatch(/as/)
    const event = await createEndpointCli(w.company.host, "X", w.receiver.url("/x"), "incident.deleted")
    expect(event.code).toBe(1)
    expect(event.stderr).toMatch(/^error: .*incident\.deleted/m)
    const http = await createEndpointCli(w.company.host, "X", "http://127.0.0.1/x", "incident.created")
    expect(http.code).toBe(1)
    expect(http.stderr).toMatch(/^error: .*https/m)
    const missing = await cli("endpoints", "test", "00000000-0000-4000-8000-000000000000", "--as", admin)
    expect(missing.code).toBe(1)
    expect(missing.stderr).toContain("no endpoint")
    const member = await cli("endpoints", "delete", endpointId, "--as", "nobody@example.test")
    expect(member.code).toBe(1)
  })

  it("--filter and --payload on create and update: the endpoint gets the matching events, thin; a bad filter exits 1 naming it and saves nothing", async () => {
    const made = await createEndpointCli(
      w.company.host,
      "Serious only",
      w.receiver.url("/cli-filtered"),
      "incident.created",
      "--filter",
      '{"severity": {"$in": ["serious", "critical"]}}',
      "--payload",
      "thin",
      "--json"
    )
    expect(made.code, made.stderr).toBe(0)
    const { id } = JSON.parse(made.stdout) as { id: string }
    const [row] = await w.db.sql<{ filter: unknown; payload: string }[]>`
      select filter, payload from service.webhook_endpoints where id = ${id}`
    expect(row).toEqual({ filter: { severity: { $in: ["serious", "critical"] } }, payload: "thin" })
    const minor = await insertIncident(w.db.sql, w.company.id, { severity: "minor" })
    const serious = await insertIncident(w.db.sql, w.company.id, { severity: "serious" })
    const [got] = await waitFor(() => {
      const r = at(w.receiver, "/cli-filtered")
      return r.length > 0 ? r : null
    }, "the serious incident")
    expect(JSON.parse(got!.body.toString()).data).toEqual({
      id: serious,
      companyId: w.company.id,
      url: `/api/v1/incidents/${serious}`
    })
    // The minor one, committed first, made no delivery.
    await new Promise((r) => setTimeout(r, 500))
    expect(at(w.receiver, "/cli-filtered").map((r) => JSON.parse(r.body.toString()).data.id)).toEqual([serious])
    expect(minor).not.toBe(serious)

    const bad = await cli("endpoints", "update", id, "--filter", '{"personName": "Sam"}', "--as", admin)
    expect(bad.code).toBe(1)
    expect(bad.stderr).toContain('filter: "personName" is withheld from privacy cases: a filter may not read it')
    const notJson = await cli("endpoints", "update", id, "--filter", "{severity: serious}", "--as", admin)
    expect(notJson.code).toBe(1)
    expect(notJson.stderr).toContain("--filter must be JSON")
    const [same] = await w.db.sql<{ filter: unknown }[]>`select filter from service.webhook_endpoints where id = ${id}`
    expect(same!.filter).toEqual({ severity: { $in: ["serious", "critical"] } })

    const off = await cli("endpoints", "update", id, "--filter", "none", "--payload", "full", "--as", admin)
    expect(off.code, off.stderr).toBe(0)
    const [after] = await w.db.sql<{ filter: unknown; payload: string }[]>`
      select filter, payload from service.webhook_endpoints where id = ${id}`
    expect(after).toEqual({ filter: null, payload: "full" })
    await cli("endpoints", "delete", id, "--as", admin)
  })

  it("endpoints delete removes it", async () => {
    const r = await cli("endpoints", "delete", endpointId, "--as", admin)
    expect(r.code).toBe(0)
    expect(
      JSON.parse((await cli("endpoints", "list", "--company", w.company.host, "--json")).stdout).map(
        (e: { id: string }) => e.id
      )
    ).not.toContain(endpointId)
  })
})
