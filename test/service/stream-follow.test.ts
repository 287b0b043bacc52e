// A follower of GET /api/v1/stream against the real service process (node src/main.ts), as an
// integrator runs one (docs/integrators.md#following-the-stream): records written in 50
// transactions that commit out of the order their updatedAt says, the service SIGKILLed while the
// follower reads, and at the end the follower's copy equals a fresh copy of the lists, every
// change having come in commit order. Then the slot is dropped and the service bootstraps again:
// the follower's next request is a 409 with mustRefetch.
import { randomBytes } from "node:crypto"
import postgres from "postgres"
import { describe, expect, it } from "vitest"
import { makeKey, request } from "../support/http.ts"
import { sample } from "../support/observed.ts"
import { freePort } from "../support/net.ts"
import { startService, streaming, waitForUrl, type ServiceProcess } from "../support/service-process.ts"
import { createCompany } from "../support/views.ts"
import { useDatabase } from "../support/fixtures.ts"
import { sleep, waitFor } from "../support/wait.ts"

const db = useDatabase()

type Item = { offset: string; resource: string; id: string; op: string; record: any; committedAt: string }

describe("following the stream through a SIGKILL and a lost slot", () => {
  it("gets every record's final state in commit order, as a fresh list copy has it; a lost slot then says mustRefetch", {
    timeout: 180_000
  }, async () => {
    const company = await createCompany(db.sql, { name: "Follow Co", mirrored: false })
    const port = await freePort()
    const base = `http://127.0.0.1:${port}`
    const env = {
      DATABASE_URL: db.url,
      PORT: String(port),
      REPLICATION_SLOT: `slot_${db.name}`,
      SEED_DEMO: "false",
      SECRETS_KEY: randomBytes(32).toString("base64"),
      API_RATE_LIMIT: "100000"
    }
    let service: ServiceProcess = startService(env)
    const up = async () => waitForUrl(`${await service.opsUrl()}/readyz`, 60_000, streaming)
    try {
      await up()
      await waitFor(
        async () => (await db.sql`select 1 from service.companies where id = ${company.id}`).length > 0,
        "capture to mirror the company",
        30_000
      )
      const { key } = await makeKey(db, { ...company })
      const start = await request(base, "/api/v1/stream?after=now", { key })
      expect(start.status).toBe(200)

      // The follower: its copy and its offset (what it would store), each page applied in order.
      const copy = new Map<string, any>()
      const received: Array<Item> = []
      let offset: string = start.json.nextOffset
      let stop = false
      let refused: { status: number; json: any } | undefined
      const follower = (async () => {
        while (!stop) {
          const a = await request(base, `/api/v1/stream?limit=7&wait=2&after=${encodeURIComponent(offset)}`, {
            key
          }).catch(() => undefined)
          if (a === undefined || a.status >= 500) {
            await sleep(100) // the service is down: try again
            continue
          }
          if (a.status !== 200) {
            refused = a
            return
          }
          for (const i of a.json.data as Array<Item>) {
            received.push(i)
            if (i.op === "delete") copy.delete(`${i.resource}/${i.id}`)
            else copy.set(`${i.resource}/${i.id}`, i.record)
          }
          offset = a.json.nextOffset
        }
      })()

      // 50 transactions, opened together; each writes a record with an updatedAt one second
      // apart and changes the ones before it, then they commit in another order than their
      // updatedAt (the last first), the service killed halfway through.
      const ids: Array<string> = []
      for (let i = 0; i < 50; i++) {
        const [r] = await db.sql<{ id: string }[]>`select gen_random_uuid()::text as id`
        ids.push(r!.id)
      }
      const order = Array.from({ length: 50 }, (_, i) => 49 - i)
      const commitIndex = new Map<string, number>()
      // A connection each: the 50 are open at once.
      const writers = postgres(db.url, { max: 50, onnotice: () => {} })
      const open = await Promise.all(
        order.map(async (i) => {
          const conn = await writers.reserve()
          await conn`begin`
          await conn`
            insert into app.incidents (id, company_id, reference, type, title, occurred_at, severity, updated_at)
            values (${ids[i]!}, ${company.id}, ${`OOO-${i}`}, 'injury', ${`written ${i}`}, now(), 'minor',
                    now() + make_interval(secs => ${i}))`
          return { i, conn }
        })
      )
      for (const [n, { i, conn }] of open.entries()) {
        // Each commit also touches the record committed just before it: a record that changes again later.
        if (n > 0) {
          const prev = open[n - 1]!.i
          await conn`update app.incidents set title = ${`changed by ${i}`}, updated_at = now() + make_interval(secs => ${i})
                     where id = ${ids[prev]!}`
        }
        if (n === 30) await conn`delete from app.incidents where id = ${ids[open[10]!.i]!}`
        await conn`commit`
        conn.release()
        commitIndex.set(String(i), n)
        if (n === 25) {
          // Mid-stream: the service dies at once, and comes back.
          service.child.kill("SIGKILL")
          await service.exited()
          service = startService(env)
          await up()
        }
        await sleep(20)
      }
      await writers.end()

      // Caught up: the follower's copy holds what the lists hold now.
      const listCopy = async () => {
        const all = new Map<string, any>()
        let cursor: string | null = null
        do {
          const page: any = (
            await request(
              base,
              `/api/v1/incidents?limit=200${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`,
              {
                key
              }
            )
          ).json
          for (const r of page.data) all.set(`incidents/${r.id}`, r)
          cursor = page.nextCursor
        } while (cursor !== null)
        return all
      }
      const fresh = await waitFor(
        async () => {
          const lists = await listCopy()
          return lists.size === 49 && JSON.stringify([...lists].sort()) === JSON.stringify([...copy].sort())
            ? lists
            : undefined
        },
        "the follower's copy to equal the lists",
        60_000,
        200
      )
      expect(copy).toEqual(fresh)
      expect(copy.has(`incidents/${ids[open[10]!.i]!}`)).toBe(false)
      // Caught up, the follower waits: the operations port counts it, and the wakes' statements.
      const ops = await service.opsUrl()
      const waiting = await waitFor(
        async () => {
          const text = await (await fetch(`${ops}/metrics`)).text()
          return sample(text, "srs_stream_waiting") === 1 ? text : undefined
        },
        "the follower counted as waiting",
        10_000,
        50
      )
      expect(sample(waiting, "srs_stream_wake_queries_total")).toBeGreaterThan(0)

      // Commit order: each record's last arrival, read in arrival order, runs through the
      // transactions in the order they committed, and never comes back to an earlier one.
      const committedIn = (item: Item) => {
        // A record is last changed by the transaction after its own, unless it is the last.
        const own = commitIndex.get(String(ids.indexOf(item.id)))!
        return item.op === "delete" ? 30 : own === 49 ? 49 : own + 1
      }
      const lastOf = new Map<string, number>()
      for (const [n, item] of received.entries()) lastOf.set(item.id, n)
      const finals = received.filter((item, n) => lastOf.get(item.id) === n)
      const places = finals.map(committedIn)
      expect(places).toEqual([...places].sort((a, b) => a - b))
      // committedAt never goes back along the stream; updatedAt does (the app set it before commit).
      const times = received.map((i) => i.committedAt)
      expect(times).toEqual([...times].sort())
      const updated = finals.filter((i) => i.record !== null).map((i) => i.record.updatedAt)
      expect(updated).not.toEqual([...updated].sort())

      // The slot is dropped while the service is stopped; it starts again, rebuilds (a new
      // epoch), and the follower's next request says to copy again.
      service.child.kill("SIGTERM")
      await service.exited()
      await db.sql`select pg_drop_replication_slot(${env.REPLICATION_SLOT})`
      await db.sql`insert into app.incidents (company_id, reference, type, title, occurred_at, severity)
                   values (${company.id}, 'GAP-1', 'injury', 'written while the slot was gone', now(), 'minor')`
      service = startService(env)
      await up()
      await waitFor(() => refused, "the follower to be refused", 30_000, 100)
      stop = true
      await follower
      expect(refused!.status).toBe(409)
      expect(refused!.json).toMatchObject({ mustRefetch: true })
      expect(refused!.json.error).toContain("copy the records again")
      // Copying again and following from now goes on.
      const again = await request(base, "/api/v1/stream?after=now", { key })
      const next = await request(base, `/api/v1/stream?after=${encodeURIComponent(again.json.nextOffset)}`, { key })
      expect(next.status).toBe(200)
    } finally {
      service.child.kill("SIGKILL")
      await service.exited().catch(() => null)
    }
  })
})
