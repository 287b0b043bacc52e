// The quarantine as an operator meets it, end to end: the real service (capture and /metrics)
// on a test database, and the real admin CLI beside it: `capture quarantine list|retry|discard`
// with their activity entries and exit codes, `status` (1 while records are held, 2 while an
// app table no longer fits, naming app.table.column) and srs_capture_quarantined.
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeCompany } from "../../support/app.ts"
import { outbox, view } from "../../support/capture.ts"
import { runCli } from "../../support/cli.ts"
import { useDatabase } from "../../support/fixtures.ts"
import { freePort } from "../../support/net.ts"
import { sample } from "../../support/observed.ts"
import { startService, streaming, type ServiceProcess, waitForUrl } from "../../support/service-process.ts"
import { waitFor } from "../../support/wait.ts"
import { setMirrorValue } from "../../support/mirror.ts"

describe("capture quarantine from the command line", () => {
  const db = useDatabase()
  let service: ServiceProcess
  let base: string
  let env: Record<string, string>
  let company: { id: string; host: string }
  const admin = "olu@quarantine.test"
  const cli = (...args: string[]) => runCli(args, env)

  const entries = async () =>
    db.sql<{ id: string; key: string; attempts: number; last_seen: Date }[]>`
      select id::text, key, attempts, last_seen from service.capture_quarantine order by id`
  const metric = async (name: string) => sample(await (await fetch(`${base}/metrics`)).text(), name)
  const audit = async (title: string, score: string) =>
    (
      await db.sql<{ id: string }[]>`
        insert into app.audits (company_id, title, performed_at, score) values (${company.id}, ${title}, now(), ${score}::numeric) returning id::text`
    )[0]!.id
  const settled = async () => {
    const [m] = await db.sql<{ lsn: string }[]>`select pg_logical_emit_message(true, 'test-sync', '')::text as lsn`
    await waitFor(
      async () =>
        (
          await db.sql<{ ok: boolean }[]>`
            select bool_or(checkpoint_lsn >= ${m!.lsn}::pg_lsn) as ok from service.capture_state`
        )[0]?.ok,
      "capture to catch up",
      30_000,
      50
    )
  }

  beforeAll(async () => {
    company = await makeCompany(db.sql)
    await db.sql`insert into app.users (company_id, name, email, role) values (${company.id}, 'Olu Operator', ${admin}, 'admin')`
    await db.sql`alter table app.audits drop constraint if exists audits_score_check`
    const port = await freePort()
    const secrets = randomBytes(32).toString("base64")
    env = { DATABASE_URL: db.url, REPLICATION_SLOT: `slot_${db.name}`, SECRETS_KEY: secrets }
    service = startService({
      ...env,
      PORT: String(port),
      SEED_DEMO: "false",
      // The contract watch reads the catalog at this interval too.
      CAPTURE_HEARTBEAT: "1 second"
    })
    // /metrics and the detailed /readyz are on the operations port.
    base = await service.opsUrl()
    await waitForUrl(`${base}/readyz`, 60_000, streaming)
  }, 90_000)

  afterAll(async () => {
    service?.child.kill("SIGTERM")
    await service?.exited().catch(() => null)
  })

  it("list, status and /metrics show what is held; retry and discard go through capture, each in the activity log", {
    timeout: 120_000
  }, async () => {
    const first = await audit("NaN one", "NaN")
    const second = await audit("NaN two", "NaN")
    const good = await audit("Fine", "40")
    await settled()
    expect(await view(db.sql, "audits", good)).toMatchObject({ score: 40 })

    // list: a table for people, the entries for scripts
    const listed = await cli("capture", "quarantine", "list", "--json")
    expect(listed.code).toBe(0)
    const held = JSON.parse(listed.stdout) as Array<Record<string, unknown>>
    expect(held.map((e) => [e.table, e.key, e.attempts, e.resource, e.companyId])).toEqual([
      ["audits", first, 1, "audits", company.id],
      ["audits", second, 1, "audits", company.id]
    ])
    expect(Object.keys(held[0]!)).toEqual([
      "id",
      "lsn",
      "table",
      "key",
      "resource",
      "companyId",
      "error",
      "firstSeen",
      "lastSeen",
      "attempts",
      "blockedBy"
    ])
    expect(held[0]!.error).toMatch(/score/)
    const [idFirst, idSecond] = held.map((e) => String(e.id))
    const text = await cli("capture", "quarantine", "list")
    expect(text.code).toBe(0)
    expect(text.stdout).toContain("2 record(s) held in quarantine")
    expect(text.stdout).toContain(`app.audits`)

    // status: degraded (1), with the count and the first error; /metrics counts them
    const status = await cli("status")
    expect(status.code).toBe(1)
    expect(status.stdout).toContain(
      `capture holds 2 records in quarantine (capture quarantine list); the first: #${idFirst} app.audits ${first}:`
    )
    expect(await metric("srs_capture_quarantined")).toBe(2)
    expect(await metric("srs_capture_contract_broken")).toBe(0)

    // bad requests: answered clearly, nothing sent
    const lsnBefore = (await db.sql<{ n: number }[]>`select count(*)::int as n from service.activity`)[0]!.n
    const unknown = await cli("capture", "quarantine", "retry", "999999")
    expect(unknown.code).toBe(1)
    expect(unknown.stderr).toContain("no held record with id 999999")
    const notAnId = await cli("capture", "quarantine", "discard", "abc")
    expect(notAnId.code).toBe(1)
    expect(notAnId.stderr).toContain("no held record with id abc")
    const neither = await cli("capture", "quarantine", "retry")
    expect(neither.code).toBe(1)
    expect(neither.stderr).toContain("give the held record's id (see capture quarantine list), or --all")
    const both = await cli("capture", "quarantine", "retry", idFirst!, "--all")
    expect(both.code).toBe(1)
    const notAdmin = await cli("capture", "quarantine", "retry", idFirst!, "--as", "nobody@quarantine.test")
    expect(notAdmin.code).toBe(1)
    expect((await db.sql<{ n: number }[]>`select count(*)::int as n from service.activity`)[0]!.n).toBe(lsnBefore)
    expect((await entries()).map((e) => e.attempts)).toEqual([1, 1])

    // retry of a record that still cannot be shaped: tried again, still held (exit 1)
    const again = await cli("capture", "quarantine", "retry", idFirst!, "--as", admin, "--json")
    expect(again.code).toBe(1)
    expect(JSON.parse(again.stdout)).toMatchObject({ retried: 1, shaped: 0, stillHeld: [{ id: idFirst, attempts: 2 }] })
    expect(again.stderr).toContain("1 record(s) still cannot be shaped")

    // A release that can read it (here: its mirrored row as a newer shaper would read it):
    // retry shapes it from its current row, writes its view and fires its event, once.
    await setMirrorValue(db.sql, "audits", first, "score", 55)
    const before = (await outbox(db.sql)).length
    const ok = await cli("capture", "quarantine", "retry", idFirst!, "--as", admin)
    expect(ok.stderr).toBe("")
    expect(ok.code).toBe(0)
    expect(ok.stdout).toContain("1 shaped again")
    expect(await view(db.sql, "audits", first)).toMatchObject({ title: "NaN one", score: 55 })
    expect((await outbox(db.sql)).slice(before).map((e) => [e.event, e.record_id])).toEqual([["audit.created", first]])
    expect((await entries()).map((e) => e.key)).toEqual([second])

    // discard: dropped from quarantine; the events it owed are never sent, even once it shapes
    const discarded = await cli("capture", "quarantine", "discard", idSecond!, "--as", admin, "--json")
    expect(discarded.code).toBe(0)
    expect(JSON.parse(discarded.stdout)).toMatchObject({ discarded: 1, entry: { id: idSecond, key: second } })
    expect(await entries()).toEqual([])
    await db.sql`update app.audits set score = 60 where id = ${second}`
    await settled()
    expect(await view(db.sql, "audits", second)).toMatchObject({ score: 60 })
    expect((await outbox(db.sql)).filter((e) => e.record_id === second)).toEqual([])

    // every request is in the company's activity log, by the admin who made it
    const activity = await db.sql<
      { kind: string; subject_id: string; actor_email: string | null; details: Record<string, unknown> }[]
    >`
      select kind, subject_id, actor_email, details from service.activity
      where company_id = ${company.id} and kind like 'quarantine.%' order by id`
    expect(activity.map((a) => [a.kind, a.subject_id, a.actor_email, a.details.key, a.details.table])).toEqual([
      ["quarantine.retried", idFirst, admin, first, "app.audits"],
      ["quarantine.retried", idFirst, admin, first, "app.audits"],
      ["quarantine.discarded", idSecond, admin, second, "app.audits"]
    ])
    const shown = await cli("activity", "--company", company.host, "--kind", "quarantine", "--json")
    expect(shown.code).toBe(0)
    expect(JSON.parse(shown.stdout).map((a: { kind: string }) => a.kind)).toEqual(
      expect.arrayContaining(["quarantine.retried", "quarantine.discarded"])
    )

    // retry --all: every held record whose table fits, in one request
    const a = await audit("NaN three", "NaN")
    const b = await audit("NaN four", "NaN")
    await settled()
    await setMirrorValue(db.sql, "audits", a, "score", 3)
    const all = await cli("capture", "quarantine", "retry", "--all", "--json")
    expect(all.code).toBe(1)
    expect(JSON.parse(all.stdout)).toMatchObject({ retried: 2, shaped: 1, stillHeld: [{ key: b, attempts: 2 }] })
    expect(await view(db.sql, "audits", a)).toMatchObject({ score: 3 })
    expect(await metric("srs_capture_quarantined")).toBe(1)
    await db.sql`update app.audits set score = 4 where id = ${b}`
    await settled()
    expect(await entries()).toEqual([])
    expect((await cli("capture", "quarantine", "retry", "--all")).stdout).toContain("Nothing to retry.")
  })

  it("status says broken (exit 2) naming app.table.column while a table no longer fits, and healthy once it does again", {
    timeout: 120_000
  }, async () => {
    await db.sql`alter table app.incidents rename column severity to gravity`
    await waitFor(async () => (await cli("status")).code === 2, "status to say broken", 30_000, 200)
    const broken = await cli("status")
    expect(broken.stdout).toContain("Health: BROKEN")
    expect(broken.stdout).toContain(
      "app.incidents.severity is not in the change stream (dropped, renamed or not published); the service reads it as text"
    )
    const json = JSON.parse((await cli("status", "--json")).stdout)
    expect(json.capture.quarantine.broken).toEqual([
      expect.objectContaining({
        table: "incidents",
        problems: expect.arrayContaining([expect.stringContaining("app.incidents.severity")])
      })
    ])
    expect(await metric("srs_capture_contract_broken")).toBe(1)

    await db.sql`alter table app.incidents rename column gravity to severity`
    let last = ""
    await waitFor(
      async () => {
        const r = await cli("status")
        last = r.stdout
        return r.code === 0
      },
      () => `status to say healthy again; it says:\n${last}`,
      30_000,
      200
    )
    expect(await metric("srs_capture_contract_broken")).toBe(0)
  })
})
