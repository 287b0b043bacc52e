// A database connection's failure that nothing awaited is logged, not fatal; anything else
// still is (src/platform/db/stray-failures.ts).
import { spawnSync } from "node:child_process"
import { describe, expect, it } from "vitest"
import { isConnectionFailure } from "../../../src/platform/db/stray-failures.ts"
import { adminUrl } from "../../support/db.ts"

const withCode = (code: string) => Object.assign(new Error(`connect ${code} 127.0.0.1:5432`), { code })

describe("isConnectionFailure", () => {
  it.each([
    ["a refused connect", withCode("ECONNREFUSED"), true],
    ["a reset", withCode("ECONNRESET"), true],
    ["postgres.js: the connection closed", withCode("CONNECTION_CLOSED"), true],
    ["postgres.js: the pool ended", withCode("CONNECTION_ENDED"), true],
    ["postgres.js: connect timed out", withCode("CONNECT_TIMEOUT"), true],
    ["a SQL error (a unique violation)", withCode("23505"), false],
    ["a TypeError (a bug)", new TypeError("Cannot read properties of undefined"), false],
    ["an error without a code", new Error("boom"), false],
    ["not an Error, though it has the code", { code: "ECONNREFUSED" }, false],
    ["a string", "ECONNREFUSED", false],
    ["undefined", undefined, false]
  ])("%s: %s", (_, reason, expected) => {
    expect(isConnectionFailure(reason)).toBe(expected)
  })
})

describe("a process with the handler installed", () => {
  const MODULE = new URL("../../../src/platform/db/stray-failures.ts", import.meta.url).href
  const run = (rejected: string) =>
    spawnSync(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `import { tolerateStrayConnectionFailures } from ${JSON.stringify(MODULE)}
         tolerateStrayConnectionFailures()
         Promise.reject(${rejected})
         setTimeout(() => console.log("still serving"), 100)`
      ],
      { encoding: "utf8", timeout: 20_000 }
    )

  it("goes on after a connection failure nothing awaited, saying so in the log", () => {
    const r = run(`Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" })`)
    expect(r.status).toBe(0)
    expect(r.stdout).toContain('"message":"a database connection failed with no request waiting on it"')
    expect(r.stdout).toContain('"code":"ECONNREFUSED"')
    expect(r.stdout).toContain("still serving")
  })

  it("still ends on any other unhandled rejection", () => {
    const r = run(`new TypeError("a bug")`)
    expect(r.status).not.toBe(0)
    expect(r.stderr).toContain("a bug")
    expect(r.stdout).not.toContain("still serving")
  })
})

describe("postgres.js, a connection lost while it fetches its types", () => {
  // The driver's first statement on a new connection reads the array types; its promise is the
  // driver's own. A server gone at that moment (and refusing the reconnection) failed it with
  // nobody holding it: an unhandled rejection. A child process, so that one is seen as it is.
  const POSTGRES = new URL("../../../node_modules/postgres/src/index.js", import.meta.url).href
  it("fails the request that opened it and leaves nothing unhandled", () => {
    const r = spawnSync(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `import postgres from ${JSON.stringify(POSTGRES)}
         import { connect, createServer } from "node:net"
         const target = new URL(process.env.PG_URL)
         const unhandled = []
         process.on("unhandledRejection", (e) => unhandled.push(String(e?.code ?? e)))
         let cut = false
         const server = createServer((client) => {
           const up = connect(Number(target.port), target.hostname)
           client.on("data", (d) => {
             // The types' statement: the connection goes, and so does the server.
             if (!cut && d.includes("pg_catalog.pg_type")) {
               cut = true
               server.close()
               client.destroy()
               up.destroy()
               return
             }
             up.write(d)
           })
           up.pipe(client)
           client.on("error", () => {})
           up.on("error", () => {})
           client.on("close", () => up.destroy())
         })
         await new Promise((r) => server.listen(0, "127.0.0.1", r))
         const u = new URL(process.env.PG_URL)
         u.hostname = "127.0.0.1"
         u.port = String(server.address().port)
         const sql = postgres(u.toString(), { max: 1, connect_timeout: 2, onnotice: () => {} })
         const outcome = await sql\`select 1 as one\`.then(() => "answered", (e) => "failed: " + (e.code ?? e.message))
         await new Promise((r) => setTimeout(r, 500))
         console.log(JSON.stringify({ cut, outcome, unhandled }))
         await sql.end({ timeout: 0 }).catch(() => {})
         process.exit(0)`
      ],
      { encoding: "utf8", timeout: 30_000, env: { ...process.env, PG_URL: adminUrl() } }
    )
    expect(r.stderr).toBe("")
    const seen = JSON.parse(r.stdout.trim().split("\n").pop()!) as {
      cut: boolean
      outcome: string
      unhandled: string[]
    }
    expect(seen.cut).toBe(true)
    expect(seen.outcome).toBe("failed: ECONNREFUSED")
    expect(seen.unhandled).toEqual([])
  })
})
