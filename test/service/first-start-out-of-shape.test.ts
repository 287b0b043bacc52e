// A first start as an operator meets it, with one app table out of shape and the publication left
// to the service to make: the service starts, `status` says broken (exit 2) naming the column,
// every other table flows; once the column is back, the table fits, is read, and its rows,
// there before the first start, fire nothing.
import { randomBytes } from "node:crypto"
import { afterAll, describe, expect, it } from "vitest"
import { insertIncident, makeCompany } from "../support/app.ts"
import { runCli } from "../support/cli.ts"
import { useDatabase } from "../support/fixtures.ts"
import { freePort } from "../support/net.ts"
import { type ServiceProcess, startService, streaming, waitForUrl } from "../support/service-process.ts"
import { waitFor } from "../support/wait.ts"

describe("a first start with a column out of shape, the publication made by the service", () => {
  const db = useDatabase()
  let service: ServiceProcess | undefined

  afterAll(async () => {
    service?.child.kill("SIGTERM")
    await service?.exited().catch(() => null)
  })

  it("breaks only that table: status names it (exit 2), others flow, and once back its old rows fire nothing", {
    timeout: 180_000
  }, async () => {
    const company = await makeCompany(db.sql)
    const [equipment] = await db.sql<{ id: string }[]>`
      insert into app.equipment (company_id, name) values (${company.id}, 'Hoist') returning id::text`
    const [failed] = await db.sql<{ id: string }[]>`
      insert into app.inspections (company_id, equipment_id, performed_at, outcome)
      values (${company.id}, ${equipment!.id}, now(), 'fail') returning id::text`
    await db.sql`alter table app.inspections rename column checklist to checklist_v2`
    const env = {
      DATABASE_URL: db.url,
      REPLICATION_SLOT: `slot_${db.name}`,
      SECRETS_KEY: randomBytes(32).toString("base64")
    }
    service = startService({
      ...env,
      PORT: String(await freePort()),
      SEED_DEMO: "false",
      CAPTURE_HEARTBEAT: "1 second"
    })
    await waitForUrl(`${await service.opsUrl()}/readyz`, 90_000, streaming)
    const cli = (...args: string[]) => runCli(args, env)
    await waitFor(async () => (await cli("status")).code === 2, "status to say broken", 30_000, 200)
    const broken = await cli("status")
    expect(broken.stdout).toContain("app.inspections.checklist is not in the change stream")
    // Other tables flow.
    const incident = await insertIncident(db.sql, company.id)
    await waitFor(
      async () => (await db.sql`select 1 from service.events where record_id = ${incident}`).length === 1,
      "the new incident's event"
    )
    // Back in shape: the service publishes the column it left out, reads the table, and the
    // inspection failed before the first start fires nothing.
    await db.sql`alter table app.inspections rename column checklist_v2 to checklist`
    await waitFor(async () => (await cli("status")).code === 0, "status to say healthy", 60_000, 200)
    await waitFor(
      async () => (await db.sql`select 1 from service.views where id = ${failed!.id}`).length === 1,
      "the old inspection's view"
    )
    expect(await db.sql`select event from service.events where record_id = ${failed!.id}`).toEqual([])
    const [pub] = await db.sql<{ attnames: string[] }[]>`
      select attnames::text[] from pg_publication_tables where tablename = 'inspections'`
    expect(pub!.attnames).toContain("checklist")
  })
})
