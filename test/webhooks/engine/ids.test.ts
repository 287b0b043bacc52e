// A delivery's id is a function of (event, destination), computed by the engine before the
// first attempt and by the database (replay, fan-out without sending): both must agree.
import { randomUUID } from "node:crypto"
import { describe, expect, it } from "vitest"
import { deliveryId } from "../../../src/webhooks/engine/ids.ts"
import { useDatabase } from "../../support/fixtures.ts"

const db = useDatabase()

describe("delivery ids", () => {
  it("the engine's and the database's agree, for endpoints and subscriptions", async () => {
    const cases = Array.from({ length: 50 }, (_, i) => ({
      event: randomUUID(),
      dest: randomUUID(),
      endpoint: i % 2 === 0
    }))
    cases.push({ event: "01966a3e-8a2b-7c3d-9e4f-0123456789ab", dest: randomUUID(), endpoint: true })
    for (const c of cases) {
      const [r] = await db.sql<{ id: string }[]>`
        select service.webhook_delivery_id(${c.event}::uuid, ${c.endpoint ? c.dest : null}::uuid, ${c.endpoint ? null : c.dest}::uuid)::text as id`
      expect(deliveryId(c.event, c.endpoint ? c.dest : null, c.endpoint ? null : c.dest)).toBe(r!.id)
    }
  })

  it("is a version 8 UUID that starts with the event id's time and tells destinations and their kinds apart", () => {
    const event = "01966a3e-8a2b-7c3d-9e4f-0123456789ab"
    const dest = randomUUID()
    const id = deliveryId(event, dest, null)
    expect(id).toMatch(/^01966a3e-8a2b-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    expect(deliveryId(event, dest, null)).toBe(id)
    expect(deliveryId(event, null, dest)).not.toBe(id)
    expect(deliveryId(event, randomUUID(), null)).not.toBe(id)
    expect(deliveryId("01966a3e-8a2b-7c3d-9e4f-0123456789ac", dest, null)).not.toBe(id)
  })
})
