// The postgres.js guard (src/platform/db/postgres-patch.ts): the check tells a patched install from an
// unpatched one (an install with --ignore-scripts), and the service and the CLIs refuse to run
// on an unpatched one, exit 1 with what to do, before they connect anywhere.
import { spawnSync } from "node:child_process"
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import {
  applyPostgresPatch,
  CLOSE_MARK,
  installedPostgresRoot,
  MARK,
  patchConnection,
  patchIndex,
  LIFO_MARK,
  patchQueue,
  QUEUE_MARK,
  RESERVE_MARK,
  TYPES_MARK,
  POSTGRES_NOT_PATCHED,
  postgresPatched,
  requirePostgresPatched
} from "../../../src/platform/db/postgres-patch.ts"

const PROJECT = fileURLToPath(new URL("../../../", import.meta.url))
const FLAVOURS = ["src", "cjs/src", "cf/src"]

const dirs: string[] = []
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})
const tempDir = (prefix: string) => {
  const d = mkdtempSync(join(tmpdir(), prefix))
  dirs.push(d)
  return d
}

// The file as npm ships it: the installed (patched) file with the patch taken out again. Patching
// it must give the installed file back byte for byte, so this cannot drift from the real one.
const unpatch = (text: string): string => {
  const start = text.indexOf(`    ${MARK}\n`)
  const end = text.indexOf("    const x = socket.write(chunk, fn)", start)
  expect(start).toBeGreaterThan(0)
  expect(end).toBeGreaterThan(start)
  return (text.slice(0, start) + text.slice(end))
    .replaceAll(
      "    clearImmediate(nextWriteTimer), nextWriteTimer = null, chunk = null\n",
      "    clearImmediate(nextWriteTimer)\n"
    )
    .replace(`    ${CLOSE_MARK}\n    const answered = errorResponse\n    errorResponse = null\n`, "")
    .replace(
      "    if (query || sent.length)\n      error(answered || ",
      "    !hadError && (query || sent.length) && error("
    )
    .replace(`return fetchArrayTypes().catch(() => {}) ${TYPES_MARK}`, "return fetchArrayTypes()")
}

const installed = installedPostgresRoot()
const installedText = (flavour: string) => readFileSync(join(installed, flavour, "connection.js"), "utf8")

/** A package tree with, in each flavour, the files `files` gives (name → text). */
const treeOf = (prefix: string, files: (flavour: string) => Record<string, string>): string => {
  const root = tempDir(prefix)
  for (const flavour of FLAVOURS) {
    mkdirSync(join(root, flavour), { recursive: true })
    for (const [name, text] of Object.entries(files(flavour))) writeFileSync(join(root, flavour, name), text)
  }
  return root
}

/** A copy of the installed package's connection.js files, as npm would ship them. */
const unpatchedCopy = (): string =>
  treeOf("srs-pg-unpatched-", (flavour) => ({ "connection.js": unpatch(installedText(flavour)) }))

describe("postgresPatched", () => {
  it("is true for the installed postgres.js, which is the exact version package.json pins", () => {
    expect(postgresPatched()).toBe(true)
    expect(() => requirePostgresPatched()).not.toThrow()
    const pinned = JSON.parse(readFileSync(join(PROJECT, "package.json"), "utf8")).dependencies.postgres
    const version = JSON.parse(readFileSync(join(installed, "package.json"), "utf8")).version
    expect(pinned).toMatch(/^\d+\.\d+\.\d+$/)
    expect(version).toBe(pinned)
  })

  it("is false for an unpatched copy, and true once the postinstall patch has run on it", () => {
    const root = unpatchedCopy()
    for (const flavour of FLAVOURS)
      expect(readFileSync(join(root, flavour, "connection.js"), "utf8")).not.toMatch(/safety-records-service|answered/)
    expect(postgresPatched(root)).toBe(false)
    expect(() => requirePostgresPatched(root)).toThrow(POSTGRES_NOT_PATCHED)

    applyPostgresPatch(root)
    expect(postgresPatched(root)).toBe(true)
    for (const flavour of FLAVOURS)
      expect(readFileSync(join(root, flavour, "connection.js"), "utf8")).toBe(installedText(flavour))
    // Idempotent, as `npm install` runs it again on every install.
    applyPostgresPatch(root)
    expect(readFileSync(join(root, "src", "connection.js"), "utf8")).toBe(installedText("src"))
  })

  it("is false when one flavour of the file lacks the patch, or when there is no file at all", () => {
    const root = unpatchedCopy()
    writeFileSync(join(root, "src", "connection.js"), installedText("src"))
    writeFileSync(join(root, "cf/src", "connection.js"), installedText("cf/src"))
    expect(postgresPatched(root)).toBe(false) // cjs/src is still as shipped
    expect(postgresPatched(tempDir("srs-pg-empty-"))).toBe(false)
  })

  it("refuses a library that no longer looks as the patch expects", () => {
    expect(() => patchConnection("function nextWrite(fn) {\n    return socket.write(chunk, fn)\n}")).toThrow(
      /postgres\.js changed/
    )
  })
})

describe("the queue patch (queue.js)", () => {
  // The queue as npm ships it: the installed (patched) file with the patch taken out again.
  const shipped = (flavour: string) => {
    const text = readFileSync(join(installed, flavour, "queue.js"), "utf8")
    const start = text.indexOf(`        ${QUEUE_MARK}\n`)
    const end = text.indexOf("        }\n", start) + "        }\n".length
    expect(start).toBeGreaterThan(0)
    return (text.slice(0, start) + text.slice(end)).replace(
      new RegExp(`    ${LIFO_MARK.replace(/[*/]/g, "\\$&")}\n    pop: [^]*?\n    },\n`),
      ""
    )
  }
  /** Loads a queue.js text as a module, with a window onto its array (for this test only). */
  const load = async (text: string, name: string) => {
    const file = join(tempDir("srs-pg-queue-"), `${name}.mjs`)
    writeFileSync(file, text.replace("let index = 0", "let index = 0\n  globalThis.__queueSlots = () => xs.length"))
    const mod = (await import(file)) as { default: () => StringQueue }
    return { Queue: mod.default, slots: () => (globalThis as unknown as { __queueSlots: () => number }).__queueSlots() }
  }
  type StringQueue = {
    push: (a: string | undefined) => string
    shift: () => string | undefined
    pop: () => string | undefined
    remove: (a: string) => string | null
    readonly length: number
  }
  /** A queue that never empties (two idle connections, one taken and given back each time). */
  const churn = (q: StringQueue, n: number) => {
    q.push("a")
    q.push("b")
    const order: Array<string | undefined> = []
    for (let i = 0; i < n; i++) {
      const c = q.shift()
      if (i < 4) order.push(c)
      q.push(c)
    }
    return order
  }

  it("shipped, a queue that never empties keeps a slot for every item it ever held; patched, it stays small", async () => {
    const before = await load(shipped("src"), "shipped")
    const q1 = before.Queue()
    churn(q1, 100_000)
    expect(before.slots()).toBeGreaterThan(100_000)

    const after = await load(patchQueue(shipped("src")), "patched")
    const q2 = after.Queue()
    expect(churn(q2, 100_000)).toEqual(["a", "b", "a", "b"]) // still first in, first out
    expect(after.slots()).toBeLessThan(200)
    expect(q2.length).toBe(2)
    expect(q2.remove("b")).toBe("b")
    expect([q2.shift(), q2.shift(), q2.length]).toEqual(["a", undefined, 0])
  })

  it("patched, pop takes the item pushed last, also after shifts left holes at the front", async () => {
    const { Queue } = await load(patchQueue(shipped("src")), "popped")
    const q = Queue()
    expect(q.pop()).toBeUndefined()
    for (const x of ["a", "b", "c", "d"]) q.push(x)
    expect([q.shift(), q.pop(), q.length]).toEqual(["a", "d", 2])
    q.push("e")
    expect([q.pop(), q.pop(), q.pop(), q.pop(), q.length]).toEqual(["e", "c", "b", undefined, 0])
    q.push("f")
    expect([q.shift(), q.length]).toEqual(["f", 0])
  })

  it("patches every flavour as installed, idempotently, and refuses a queue that changed", () => {
    for (const flavour of FLAVOURS) {
      const installedQueue = readFileSync(join(installed, flavour, "queue.js"), "utf8")
      expect(installedQueue).toContain(QUEUE_MARK)
      expect(patchQueue(shipped(flavour))).toBe(installedQueue)
      expect(patchQueue(installedQueue)).toBe(installedQueue)
    }
    expect(() => patchQueue("function Queue() { return [] }")).toThrow(/postgres\.js changed/)
  })

  it("a tree whose connection is patched but whose queue is as shipped is not patched", () => {
    const root = treeOf("srs-pg-half-", (flavour) => ({
      "connection.js": installedText(flavour),
      "queue.js": shipped(flavour)
    }))
    expect(postgresPatched(root)).toBe(false)
    applyPostgresPatch(root)
    expect(postgresPatched(root)).toBe(true)
  })
})

describe("the reserved connection patch (index.js)", () => {
  // index.js as npm ships it: the installed (patched) file with the patch taken out again.
  const shipped = (flavour: string) =>
    readFileSync(join(installed, flavour, "index.js"), "utf8")
      .replace(/\n {4}\/\* safety-records-service: reserved connection closed \*\/\n(?:.*\n){5}/, "\n")
      .replace("      if (gone) return\n      c.onclose = null\n", "")
      .replace("      if (gone) return q.reject(gone)\n", "")
      .replaceAll(`open.pop() ${LIFO_MARK}`, "open.shift()")
      .replace(`open.pop(), query) ${LIFO_MARK}`, "open.shift(), query)")

  it("patches every flavour as installed, idempotently, and refuses an index.js that changed", () => {
    for (const flavour of FLAVOURS) {
      const installedIndex = readFileSync(join(installed, flavour, "index.js"), "utf8")
      expect(installedIndex).toContain(RESERVE_MARK)
      const original = shipped(flavour)
      expect(original).not.toContain("gone")
      expect(original).not.toContain("open.pop")
      expect(patchIndex(original)).toBe(installedIndex)
      expect(patchIndex(installedIndex)).toBe(installedIndex)
    }
    expect(() => patchIndex("async function reserve() {}")).toThrow(/postgres\.js changed/)
  })

  it("a tree whose index.js is as shipped is not patched", () => {
    const root = treeOf("srs-pg-index-", (flavour) => ({
      "connection.js": installedText(flavour),
      "queue.js": readFileSync(join(installed, flavour, "queue.js"), "utf8"),
      "index.js": shipped(flavour)
    }))
    expect(postgresPatched(root)).toBe(false)
    applyPostgresPatch(root)
    expect(postgresPatched(root)).toBe(true)
  })
})

describe("an install without the patch", () => {
  // The project as `npm ci --ignore-scripts` leaves it: the same code and packages, except that
  // postgres.js is as npm ships it. Packages are linked, not copied; postgres is a real copy.
  const project = (() => {
    const root = tempDir("srs-pg-project-")
    cpSync(join(PROJECT, "src"), join(root, "src"), { recursive: true })
    cpSync(join(PROJECT, "sql"), join(root, "sql"), { recursive: true })
    cpSync(join(PROJECT, "package.json"), join(root, "package.json"))
    const modules = join(PROJECT, "node_modules")
    mkdirSync(join(root, "node_modules"))
    for (const name of readdirSync(modules)) {
      if (name === "postgres" || name.startsWith(".")) continue
      symlinkSync(join(modules, name), join(root, "node_modules", name))
    }
    cpSync(installed, join(root, "node_modules", "postgres"), { recursive: true })
    for (const flavour of FLAVOURS) {
      const file = join(root, "node_modules", "postgres", flavour, "connection.js")
      writeFileSync(file, unpatch(readFileSync(file, "utf8")))
    }
    return root
  })()

  // Nothing listens on port 9 of loopback: a process that got past the check would fail on
  // connecting, with another message.
  const run = (script: string, ...args: string[]) =>
    spawnSync(process.execPath, [join(project, script), ...args], {
      cwd: project,
      env: { ...process.env, DATABASE_URL: "postgres://nobody:nothing@127.0.0.1:9/none" },
      encoding: "utf8",
      timeout: 60_000
    })

  it("stops the service, the admin CLI and the seeder with exit 1 and what to do", { timeout: 120_000 }, () => {
    for (const [script, ...args] of [
      ["src/main.ts"],
      ["src/faces/cli/admin.ts", "status"],
      ["src/faces/cli/seed.ts"]
    ] as const) {
      const result = run(script, ...args)
      expect(result.status, `${script}: ${result.stdout}${result.stderr}`).toBe(1)
      expect(result.stdout + result.stderr, script).toContain("postgres.js is not patched")
      expect(result.stdout + result.stderr, script).toContain("npm run postinstall")
      expect(result.stdout + result.stderr, script).not.toMatch(/ECONNREFUSED/)
    }
    // What the message says to run (the postinstall script) puts the patch in place.
    expect(postgresPatched(join(project, "node_modules", "postgres"))).toBe(false)
    const patched = spawnSync(process.execPath, [join(project, "src/platform/db/patch-postgres.ts")], {
      cwd: project,
      encoding: "utf8"
    })
    expect(patched.status, patched.stderr).toBe(0)
    expect(postgresPatched(join(project, "node_modules", "postgres"))).toBe(true)
  })
})
