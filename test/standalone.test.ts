// The repository stands alone: no comment, description, test name or document cites a section
// of a spec, an issue or a work session that a reader of this repository does not have, or
// links out of it (../shared). Comments point at the docs instead (docs/events.md#signing,
// docs/design.md, "Quarantine"), and those pointers, like every link between README.md and
// docs/*.md, must lead somewhere: the page exists, the anchor is one of its headings (GitHub's
// rule), the quoted bullet is in it.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"

const ROOT = resolve(import.meta.dirname, "..")
const SELF = fileURLToPath(import.meta.url)

/** What is read for citations: the code, its tests, tools, docs and deployment files. */
const ROOTS = [
  "src",
  "test",
  "bench",
  "client",
  "examples",
  "deploy",
  "docs",
  "sql",
  "README.md",
  "Dockerfile",
  "docker-compose.yml",
  "package.json",
  "vitest.config.ts",
  ".ci"
]
const SKIPPED_DIRS = new Set(["node_modules", "dist", ".data", "__pycache__"])

/**
 * Migrations applied before this check existed, whose comments still cite issues: each applied
 * migration's checksum is stored (src/platform/db/migrate.ts) and a changed file stops the
 * service on every database that applied it, so these stay as they are (a rewrite needs an
 * equivalent-to directive, and loses its citations then). A new migration is read. The
 * released texts of rewritten ones, and earlier texts of others, are kept as deployments
 * applied them.
 */
const FROZEN_MIGRATIONS = [
  "sql/004_service_webhooks.sql",
  "sql/008_api_keys_fingerprint_only.sql",
  "sql/011_secrets_key.sql",
  "sql/017_capture_stall.sql",
  "sql/018_secret_overlap.sql",
  "sql/019_replays.sql",
  "test/platform/db/released/003_service_keys.sql",
  "test/platform/db/released/012_sync.sql",
  "test/platform/db/released/020_delivery_once.sql",
  "test/platform/db/released/021_capture_writes.sql",
  "test/platform/db/earlier/004_service_webhooks.sql",
  "test/platform/db/earlier/011_secrets_key.sql",
  "test/platform/db/earlier/019_replays.sql"
]

const filesUnder = (path: string): Array<string> => {
  if (!existsSync(path)) return []
  if (!statSync(path).isDirectory()) return [path]
  return readdirSync(path, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() && SKIPPED_DIRS.has(e.name) ? [] : filesUnder(join(path, e.name))
  )
}

/** Text files only (a NUL byte marks a binary one). */
const readText = (file: string): string | undefined => {
  const text = readFileSync(file, "utf8")
  return text.includes("\0") ? undefined : text
}

const CITATIONS: ReadonlyArray<RegExp> = [
  /\bspec(?:ification)?\s*(?:section\s*)?§?\s*\d+(?:\.\d+)*/gi, // spec 5.2, Spec 8, spec section 4
  /\bissues?\s*#?\d+(?:\.\d+)*/gi, // issue 15, Issue 16.5/16.6, issue #4
  /\bissue rule\b/gi,
  /(?<!\bRFC\s*\d+,?\s*)\bsection\s*§?\d+(?:\.\d+)*/gi, // section 6 (an RFC's section is fine)
  /§\s*\d+/g,
  /\b(?:work\s*)?sessions?\s*#?\d+\b/gi, // session 12
  /\bwe tried\b/gi,
  /\.\.\/shared\b|\bshared\/(?:spec|notes)\b/g,
  /\bapp-database\.md\b|\bspec\/service\.md\b/g,
  /\bthe spec\b|\bspec(?:'s| order)\b|\(spec:\s*\d/gi
]

/** Each citation of a document the repository does not have, as "line: text". */
const citationsIn = (text: string): Array<string> =>
  text
    .split("\n")
    .flatMap((line, i) =>
      CITATIONS.flatMap((pattern) => [...line.matchAll(pattern)].map((m) => `${i + 1}: ${m[0].trim()}`))
    )

/** GitHub's anchor of a heading: markup dropped, lower case, punctuation dropped, spaces to hyphens. */
const slugOf = (heading: string): string =>
  heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "")
    .replace(/ /g, "-")

/** Lines outside fenced code blocks (a heading or a link inside one is text, not markup). */
const proseLines = (markdown: string): Array<string> => {
  let fence: string | undefined
  return markdown.split("\n").map((line) => {
    const open = /^\s*(`{3,}|~{3,})/.exec(line)
    if (open !== null) {
      if (fence === undefined) fence = open[1]![0]
      else if (open[1]![0] === fence) fence = undefined
      return ""
    }
    return fence === undefined ? line : ""
  })
}

/** The anchors of a markdown page's headings; a repeated heading gets -1, -2, ... as on GitHub. */
const anchorsOf = (markdown: string): Set<string> => {
  const seen = new Map<string, number>()
  const anchors = new Set<string>()
  for (const line of proseLines(markdown)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)
    if (heading === null) continue
    const slug = slugOf(heading[1]!)
    const n = seen.get(slug) ?? 0
    seen.set(slug, n + 1)
    anchors.add(n === 0 ? slug : `${slug}-${n}`)
  }
  return anchors
}

/** The relative links of a markdown page (inline code and fenced blocks left out). */
const linksOf = (markdown: string): Array<string> =>
  proseLines(markdown).flatMap((line) =>
    [...line.replace(/`[^`]*`/g, "").matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)]
      .map((m) => m[1]!)
      .filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target) && !target.startsWith("//"))
  )

/** A comment's pointer into the docs: docs/<page>.md, its #anchor, or a quoted bullet after it. */
const POINTER = /\bdocs\/([\w.-]+\.md)(?:#([\w-]+))?(?:,\s*"([^"\n]+)")?/g

/** Comment continuations joined, so a quoted bullet broken over two comment lines reads whole. */
const joinedComments = (text: string): string => text.replace(/\n[ \t]*(?:\/\/|\*|--|#)[ \t]*/g, " ")

/** Why one link or pointer leads nowhere, or undefined when it resolves. */
const brokenTarget = (
  path: string,
  anchor: string | undefined,
  quoted: string | undefined,
  docs: (path: string) => { readonly anchors: Set<string>; readonly text: string } | undefined
): string | undefined => {
  if (!existsSync(path)) return "no such file"
  if (anchor === undefined && quoted === undefined) return undefined
  const doc = docs(path)
  if (doc === undefined) return "not a markdown page"
  if (anchor !== undefined && !doc.anchors.has(anchor)) return `no heading with the anchor #${anchor}`
  if (quoted !== undefined && !doc.text.toLowerCase().includes(quoted.toLowerCase())) return `no "${quoted}" in it`
  return undefined
}

describe("the repository stands alone", () => {
  const files = ROOTS.flatMap((r) => filesUnder(join(ROOT, r)))
  const texts = new Map(
    files.flatMap((f) => {
      const text = readText(f)
      return text === undefined ? [] : [[f, text] as const]
    })
  )
  const pages = new Map<string, { readonly anchors: Set<string>; readonly text: string }>()
  const page = (path: string) => {
    if (!path.endsWith(".md") || !existsSync(path)) return undefined
    let found = pages.get(path)
    if (found === undefined) {
      const text = readFileSync(path, "utf8")
      found = { anchors: anchorsOf(text), text }
      pages.set(path, found)
    }
    return found
  }
  const markdown = [join(ROOT, "README.md"), ...filesUnder(join(ROOT, "docs")).filter((f) => f.endsWith(".md"))]

  it("reads what it checks", () => {
    // A walk that found nothing would pass every check below.
    const read = [...texts.keys()].map((f) => relative(ROOT, f))
    expect(read.length).toBeGreaterThan(300)
    for (const f of [
      "src/main.ts",
      "client/src/schema.d.ts",
      "examples/python-receiver",
      "docs/events.md",
      "README.md"
    ])
      expect(read.some((r) => r.startsWith(f))).toBe(true)
    for (const f of FROZEN_MIGRATIONS) expect(existsSync(join(ROOT, f))).toBe(true)
    expect(markdown.length).toBeGreaterThan(8)
  })

  it("nothing cites a spec section, an issue, a session or ../shared", () => {
    const frozen = new Set(FROZEN_MIGRATIONS.map((f) => join(ROOT, f)))
    const found = [...texts]
      .filter(([f]) => f !== SELF && !frozen.has(f))
      .flatMap(([f, text]) => citationsIn(text).map((c) => `${relative(ROOT, f)}:${c}`))
    expect(found).toEqual([])
  })

  it("every relative link and anchor of README.md and docs/*.md resolves", () => {
    const broken: Array<string> = []
    let checked = 0
    for (const file of markdown) {
      for (const link of linksOf(readFileSync(file, "utf8"))) {
        const [target, anchor] = link.split("#", 2) as [string, string | undefined]
        const path = target === "" ? file : resolve(dirname(file), decodeURI(target))
        const why = brokenTarget(path, anchor === "" ? undefined : anchor, undefined, page)
        if (why !== undefined) broken.push(`${relative(ROOT, file)}: (${link}): ${why}`)
        checked++
      }
    }
    expect(checked).toBeGreaterThan(80)
    expect(broken).toEqual([])
  })

  it("every pointer into docs/ from the code, tests and tools resolves", () => {
    const broken: Array<string> = []
    let checked = 0
    for (const [file, text] of texts) {
      if (file === SELF || file.endsWith(".md")) continue
      for (const m of joinedComments(text).matchAll(POINTER)) {
        const why = brokenTarget(join(ROOT, "docs", m[1]!), m[2], m[3], page)
        if (why !== undefined) broken.push(`${relative(ROOT, file)}: ${m[0]}: ${why}`)
        checked++
      }
    }
    expect(checked).toBeGreaterThan(80)
    expect(broken).toEqual([])
  })

  it("finds a citation when there is one (the check itself)", () => {
    const planted = [
      "// The delivery body (spec 6.2): its fields",
      "/** Spec 8: at most 20 active keys per company. */",
      "// Rotation with overlap (issue 15.5), end to end",
      "// Issue 16.5/16.6: replays",
      'it("the default is per issue #4", () => {',
      "// measured in session 12",
      "// see ../shared/spec/service.md",
      "// the NEVER columns of app-database.md",
      "/** An answer must be complete within this (spec: 10 s). */",
      "// in spec order"
    ]
    for (const line of planted) expect(citationsIn(line), line).not.toEqual([])
    expect(citationsIn("a\n// (issue 13.7)\nb")).toEqual(["2: issue 13.7"])
    const clean = [
      "// The delivery body (docs/events.md#the-delivery-request): its fields",
      "// (RFC 9110 section 13.1.2: '*' names any)",
      "export const documentHeaders = (spec: Json): Json => {",
      "// webhook-signature (the Standard Webhooks spec allows several)",
      "// a schema issue on one line; this session ends; an admin session"
    ]
    for (const line of clean) expect(citationsIn(line), line).toEqual([])
  })

  it("turns headings into GitHub's anchors and finds links and pointers (the check itself)", () => {
    expect(slugOf("`corrective_action.closed`")).toBe("corrective_actionclosed")
    expect(slugOf("Events feed: `GET /api/v1/events`")).toBe("events-feed-get-apiv1events")
    expect(slugOf("Not downloading what you already have: ETag")).toBe("not-downloading-what-you-already-have-etag")
    expect(slugOf("What changed: `sort=updatedAt` and `updatedAfter`")).toBe(
      "what-changed-sortupdatedat-and-updatedafter"
    )
    expect(slugOf("Least privilege and managed PostgreSQL")).toBe("least-privilege-and-managed-postgresql")
    const doc = "# Title\n\n## History\n\n```sh\n# not a heading\n[no](link.md)\n```\n\n## History\n"
    expect([...anchorsOf(doc)]).toEqual(["title", "history", "history-1"])
    expect(
      linksOf("See [a](api.md#keys), [b](#rate-limit), `[c](code.md)`, [d](https://example.com) and [e](../README.md).")
    ).toEqual(["api.md#keys", "#rate-limit", "../README.md"])
    const pointers = [
      ...joinedComments('// (docs/design.md, "Capture\n// pipelines its batches"), docs/api.md#keys').matchAll(POINTER)
    ].map((m) => [m[1], m[2], m[3]])
    expect(pointers).toEqual([
      ["design.md", undefined, "Capture pipelines its batches"],
      ["api.md", "keys", undefined]
    ])
    const docs = (path: string) =>
      path === "events.md" ? { anchors: new Set(["signing"]), text: "**Quarantine, not a stopped stream**" } : undefined
    const real = join(ROOT, "docs/events.md")
    expect(brokenTarget(real, "signing", undefined, () => docs("events.md"))).toBeUndefined()
    expect(brokenTarget(real, "signin", undefined, () => docs("events.md"))).toBe("no heading with the anchor #signin")
    expect(brokenTarget(real, undefined, "quarantine", () => docs("events.md"))).toBeUndefined()
    expect(brokenTarget(real, undefined, "Sharding", () => docs("events.md"))).toBe('no "Sharding" in it')
    expect(brokenTarget(join(ROOT, "docs/nowhere.md"), undefined, undefined, docs)).toBe("no such file")
  })
})
