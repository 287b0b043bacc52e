// The folder map's import rules (README, "Folder map"), read off the source: each concept
// imports only the ones below it, faces are imported by nothing but faces and main.ts, no
// two concepts import each other, directly or round a loop, and the faces hold no SQL.
import { readdirSync, readFileSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { describe, expect, it } from "vitest"

const SRC = resolve(import.meta.dirname, "../src")

/** What each concept may import (besides itself). Faces and main.ts may import anything. */
const MAY_IMPORT: Readonly<Record<string, ReadonlyArray<string>>> = {
  domain: [],
  platform: ["domain"],
  "pipeline/projection": ["domain", "platform"],
  "pipeline/outbox": ["domain", "platform", "pipeline/projection"],
  "pipeline/capture": ["domain", "platform", "pipeline/projection", "pipeline/outbox"],
  access: ["domain", "platform"],
  read: ["domain", "platform", "access", "webhooks", "pipeline/outbox"],
  webhooks: ["domain", "platform", "pipeline/projection", "pipeline/outbox", "pipeline/capture", "access"],
  seed: ["domain", "platform"]
}

/** Every concept of the map: a folder that is none of these is a concept nobody gave rules. */
const FACES_AND_ROOT = ["faces", "main"]

/** The concept a source file belongs to: its top folder, or for pipeline and faces the folder below. */
const unitOf = (file: string): string => {
  const parts = relative(SRC, file).split("/")
  if (parts.length === 1) return parts[0] === "main.ts" ? "main" : "faces"
  if ((parts[0] === "pipeline" || parts[0] === "faces") && parts.length > 2) return `${parts[0]}/${parts[1]}`
  return parts[0]!
}

const sourceFiles = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : []
  )

const IMPORT = /(?:^|\n)\s*(?:import|export)\b[^"'`;]*?from\s*["'](\.[^"']+)["']|\bimport\(\s*["'](\.[^"']+)["']\s*\)/g

/** Every relative import in src: [importing file, imported file]. */
const importsOf = (files: ReadonlyArray<string>): Array<readonly [string, string]> =>
  files.flatMap((file) =>
    [...readFileSync(file, "utf8").matchAll(IMPORT)].map(
      (m) => [file, resolve(dirname(file), (m[1] ?? m[2])!)] as const
    )
  )

/** Import edges between concepts, each with one file pair that makes it. */
const conceptEdges = (edges: ReadonlyArray<readonly [string, string]>) => {
  const out = new Map<string, Map<string, string>>()
  for (const [from, to] of edges) {
    const a = unitOf(from)
    const b = unitOf(to)
    if (a === b) continue
    const targets = out.get(a) ?? new Map<string, string>()
    if (!targets.has(b)) targets.set(b, `${relative(SRC, from)} -> ${relative(SRC, to)}`)
    out.set(a, targets)
  }
  return out
}

/** Loops in a directed graph (Tarjan's strongly connected components of more than one node). */
const loopsIn = (graph: ReadonlyMap<string, Iterable<string>>): Array<Array<string>> => {
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: Array<string> = []
  const onStack = new Set<string>()
  const loops: Array<Array<string>> = []
  let next = 0
  const visit = (v: string) => {
    index.set(v, next)
    low.set(v, next++)
    stack.push(v)
    onStack.add(v)
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!))
    }
    if (low.get(v) === index.get(v)) {
      const loop: Array<string> = []
      let w: string
      do {
        w = stack.pop()!
        onStack.delete(w)
        loop.push(w)
      } while (w !== v)
      if (loop.length > 1) loops.push(loop.sort())
    }
  }
  for (const v of graph.keys()) if (!index.has(v)) visit(v)
  return loops
}

/**
 * Statements in a file: a tagged template of a database handle (sql`...`, tx`...`, db`...`,
 * with or without a row type) or text run as SQL (.unsafe(...)). Comments are not code.
 */
const statementsIn = (text: string): Array<string> => {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`])\/\/.*$/gm, "$1")
  return [...code.matchAll(/\b(?:sql|tx|db|conn|pool|planned)\s*(?:<[^`]*?>)?\s*`|\.unsafe\(/g)].map((m) =>
    m[0].replace(/\s+/g, " ")
  )
}

describe("folder map", () => {
  const files = sourceFiles(SRC)
  const edges = conceptEdges(importsOf(files))

  it("reads the imports it checks", () => {
    // A parser that found nothing would pass every rule below.
    expect(files.length).toBeGreaterThan(100)
    expect(edges.get("faces/api")?.has("domain")).toBe(true)
    expect(edges.get("pipeline/capture")?.has("pipeline/projection")).toBe(true)
  })

  it("each concept imports only the concepts below it", () => {
    const broken: Array<string> = []
    for (const [from, targets] of edges) {
      const allowed = MAY_IMPORT[from]
      if (allowed === undefined) {
        // faces and main.ts; a new folder must be given its rules
        if (!FACES_AND_ROOT.includes(from) && !from.startsWith("faces/")) broken.push(`${from} has no rules`)
        continue
      }
      for (const [to, why] of targets) if (!allowed.includes(to)) broken.push(`${from} may not import ${to}: ${why}`)
    }
    expect(broken).toEqual([])
  })

  it("nothing but faces and main.ts imports a face or the demo app", () => {
    const broken: Array<string> = []
    for (const [from, targets] of edges) {
      if (from === "main" || from === "faces" || from.startsWith("faces/")) continue
      for (const [to, why] of targets) if (to === "faces" || to.startsWith("faces/") || to === "main") broken.push(why)
    }
    expect(broken).toEqual([])
  })

  it("no two concepts import each other, directly or round a loop", () => {
    const graph = new Map([...edges].map(([from, targets]) => [from, [...targets.keys()]] as const))
    expect(loopsIn(graph)).toEqual([])
  })

  it("the faces hold no SQL: they decode requests and encode answers, each concept owns its statements", () => {
    const faces = files.filter((f) => relative(SRC, f).startsWith("faces/"))
    expect(faces.length).toBeGreaterThan(40)
    const found = faces.flatMap((f) => statementsIn(readFileSync(f, "utf8")).map((s) => `${relative(SRC, f)}: ${s}`))
    expect(found).toEqual([])
  })

  it("finds statements when there are some (the check itself)", () => {
    expect(statementsIn("const [r] = await sql<{ n: number }[]>`select 1`")).toEqual(["sql<{ n: number }[]>`"])
    expect(statementsIn("query((tx) => tx`update x set y = 1`)")).toEqual(["tx`"])
    expect(statementsIn("sql.unsafe(TEXT, [], { prepare: true })")).toEqual([".unsafe("])
    // an html template whose placeholder holds sql, and a comment
    expect(statementsIn(`html\`<p>\${sql}</p>\` // a sql\`x\` in a comment`)).toEqual([])
    expect(statementsIn("/* db`select` */ const s = `select 1`")).toEqual([])
  })

  it("finds a loop when there is one (the check itself)", () => {
    const graph = new Map([
      ["a", ["b"]],
      ["b", ["c"]],
      ["c", ["a", "d"]],
      ["d", []]
    ])
    expect(loopsIn(graph)).toEqual([["a", "b", "c"]])
    expect(
      loopsIn(
        new Map([
          ["a", ["b"]],
          ["b", []]
        ])
      )
    ).toEqual([])
  })
})
