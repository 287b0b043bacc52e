// A publication altered while capture runs: the new Relation message shows a NEVER column
// before any row of it, and capture stops there, storing nothing, and keeps refusing.
import { describe, expect, it } from "vitest"
import { PUBLISHED_COLUMNS } from "../../../src/domain/records/index.ts"
import { useCaptureWorld } from "../../support/capture.ts"
import { waitFor } from "../../support/wait.ts"
import { eventPayload } from "../../../src/pipeline/outbox/events.ts"

describe("capture and a publication altered under it", () => {
  const { db, cap } = useCaptureWorld()

  it("stops before a NEVER value is stored, naming the column", { timeout: 60_000 }, async () => {
    const [company] = await db.sql<{ id: string }[]>`select id::text from app.companies limit 1`
    await db.sql.unsafe(`alter publication safety_records_service drop table app.workers`)
    await db.sql.unsafe(
      `alter publication safety_records_service add table app.workers (${[...PUBLISHED_COLUMNS.workers!, "phone"].join(", ")})`
    )
    await db.sql`insert into app.workers (company_id, name, status, phone) values (${company!.id}, 'Pim', 'active', '+31 555 0199')`
    const logged = (text: string) => cap.logs.some((l) => l.message.includes(text))
    const logs = () => `logs: ${cap.logs.map((l) => l.message).join(" | ")}`
    await waitFor(
      () => logged("app.workers.phone"),
      () => `a refusal; ${logs()}`,
      20_000,
      50
    )
    // The phone as written ("555" alone is in one random UUID of ~140: the company's id, in
    // its row and its modules' rows, once failed this on a clean run).
    const stored = await db.sql<{ n: number }[]>`
      select (select count(*) from service.rows where data::text like '%555 0199%')
           + (select count(*) from service.views where body like '%Pim%')
           + (select count(*) from service.events e where ${db.sql.unsafe(eventPayload("e"))} like '%555 0199%') as n`
    expect(Number(stored[0]!.n)).toBe(0)
    // After reconnecting it refuses at the publication check, not at the row.
    await waitFor(
      () => logged("app.workers.phone is published, and it is NEVER sent"),
      () => `a refusal at the check; ${logs()}`,
      20_000,
      50
    )
  })
})
