// examples/stream/follow.mjs against the real server and capture: it copies the lists, follows
// the stream into its JSON file, is SIGKILLed while changes keep coming, resumes from its file,
// and ends with the same records the lists hold.
import { spawn, type ChildProcess } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { insertAction, insertIncident } from "../support/app.ts"
import { makeKey, request } from "../support/http.ts"
import { createCompany, type TestCompany } from "../support/views.ts"
import { sleep, useServiceWorld, waitFor } from "../support/world.ts"

const FOLLOW = fileURLToPath(new URL("../../examples/stream/follow.mjs", import.meta.url))

describe("examples/stream/follow.mjs", () => {
  let acme: TestCompany
  const world = useServiceWorld({
    seed: async (sql) => {
      acme = await createCompany(sql, { name: "Follow Example", mirrored: false })
    },
    receiver: false,
    settings: { rateLimit: 1_000_000 }
  })
  const dir = mkdtempSync(join(tmpdir(), "srs-follow-"))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it("keeps a JSON copy equal to the lists, across a SIGKILL", { timeout: 90_000 }, async () => {
    const { db, server, cap } = world
    const key = (await makeKey(db, acme, { scopes: ["incidents", "corrective-actions"] })).key
    const before = [await insertIncident(db.sql, acme.id), await insertAction(db.sql, acme.id)]
    await cap.settle()
    const state = join(dir, "copy.json")
    const run = (): { child: ChildProcess; out: () => string } => {
      let out = ""
      const child = spawn(process.execPath, [FOLLOW, "--state", state], {
        env: { ...process.env, API_URL: server.url, API_KEY: key },
        stdio: ["ignore", "pipe", "pipe"]
      })
      child.stdout!.on("data", (d) => (out += d))
      child.stderr!.on("data", (d) => (out += d))
      return { child, out: () => out }
    }
    const read = () => {
      try {
        return JSON.parse(readFileSync(state, "utf8")) as { offset: string; records: Record<string, any> }
      } catch {
        return undefined
      }
    }
    let f = run()
    await waitFor(() => read(), "the first copy", 30_000)
    expect(Object.keys(read()!.records).sort()).toEqual(
      [`incidents/${before[0]}`, `corrective-actions/${before[1]}`].sort()
    )
    // Changes while it follows; it is killed halfway, and changes keep coming while it is gone.
    const written: Array<string> = []
    for (let i = 0; i < 20; i++) {
      written.push(await insertIncident(db.sql, acme.id, { title: `Follow ${i}` }))
      if (i === 5)
        await db.sql`update app.corrective_actions set status = 'in_progress', updated_at = now() where id = ${before[1]!}`
      if (i === 8) await db.sql`delete from app.incidents where id = ${before[0]!}`
      if (i === 10) {
        await waitFor(() => f.out().includes("applied"), "a change applied", 20_000)
        f.child.kill("SIGKILL")
        await new Promise((r) => f.child.once("exit", r))
      }
      await sleep(30)
    }
    await cap.settle()
    f = run()
    const lists = async () => {
      const all: Record<string, unknown> = {}
      for (const resource of ["incidents", "corrective-actions"]) {
        const page = await request(server.url, `/api/v1/${resource}?limit=200`, { key })
        for (const r of page.json.data) all[`${resource}/${r.id}`] = r
      }
      return all
    }
    const expected = await lists()
    expect(Object.keys(expected)).toHaveLength(21)
    await waitFor(
      () =>
        JSON.stringify(read()?.records, Object.keys(expected).sort()) ===
        JSON.stringify(expected, Object.keys(expected).sort())
          ? true
          : undefined,
      "the copy to catch up",
      30_000
    )
    const copy = read()!.records
    expect(Object.keys(copy).sort()).toEqual(Object.keys(expected).sort())
    for (const k of Object.keys(expected)) expect(copy[k]).toEqual(expected[k])
    expect(f.out()).not.toContain("copied") // it resumed from its file, no second copy
    f.child.kill("SIGTERM")
  })
})
