// Views stored in an older shape version are rebuilt when capture starts, before it streams.
import { describe, expect, it } from "vitest"
import { PROJECTION_VERSION } from "../../../src/pipeline/projection/version.ts"
import { insertIncident, makeCompany } from "../../support/app.ts"
import { startCapture, view } from "../../support/capture.ts"
import { useDatabase } from "../../support/fixtures.ts"

describe("record shapes' version", () => {
  const db = useDatabase()

  it("a first start marks the views as the current version", async () => {
    const cap = startCapture(db)
    try {
      await cap.settle()
    } finally {
      await cap.stop()
    }
    const [row] = await db.sql<{ version: number }[]>`select version from service.projection`
    expect(row!.version).toBe(PROJECTION_VERSION)
  })

  it("views of an older version are rebuilt at start, and changes made meanwhile still arrive", async () => {
    const company = await makeCompany(db.sql)
    let cap = startCapture(db)
    const id = await insertIncident(db.sql, company.id)
    await cap.settle()
    await cap.stop()
    // As an older version would have stored it: no companyId.
    const current = (await view(db.sql, "incidents", id))!
    expect(current.companyId).toBe(company.id)
    const { companyId: _, ...old } = current
    await db.sql`update service.views set body = ${JSON.stringify(old)} where resource = 'incidents' and id = ${id}`
    await db.sql`update service.projection set version = ${PROJECTION_VERSION - 1}`
    const later = await insertIncident(db.sql, company.id) // while capture is down

    cap = startCapture(db)
    try {
      await cap.settle()
      expect(await view(db.sql, "incidents", id)).toEqual(current)
      expect((await view(db.sql, "incidents", later))?.companyId).toBe(company.id)
      const [row] = await db.sql<{ version: number }[]>`select version from service.projection`
      expect(row!.version).toBe(PROJECTION_VERSION)
      expect(cap.logs.some((l) => l.message.includes("record shapes changed"))).toBe(true)
    } finally {
      await cap.stop()
    }
  })
})
