// A database connection's failure that nothing awaited is logged, not fatal; anything else
// still is (src/platform/db/stray-failures.ts).
import { spawnSync } from "node:child_process"
import { describe, expect, it } from "vitest"
import { isConnectionFailure } from "../../../src/platform/db/stray-failures.ts"

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
