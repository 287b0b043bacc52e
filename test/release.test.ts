// A release an operator can follow (CHANGELOG.md, docs/deployment.md#upgrades): package.json's
// version is semver and has its changelog entry; every migration is named in the changelog,
// and every fence a migration raises is a release the changelog has; the version is what the
// process reports (srs_build_info), while the webhooks' User-Agent keeps its suffix /1.
import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { makeServiceMetrics } from "../src/faces/ops/metrics.ts"
import { generationOf, loadMigrations } from "../src/platform/db/migrations.ts"
import { RELEASE } from "../src/platform/release.ts"
import { USER_AGENT } from "../src/webhooks/net/sender.ts"

const root = new URL("../", import.meta.url)
const changelog = readFileSync(new URL("CHANGELOG.md", root), "utf8")
const version = (JSON.parse(readFileSync(new URL("package.json", root), "utf8")) as { version: string }).version

/** The releases the changelog has, newest first, with their dates. */
const releases = [...changelog.matchAll(/^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$/gm)].map((m) => ({
  version: m[1]!,
  date: m[2]!
}))
const newer = (a: string, b: string) => {
  const [x, y] = [a, b].map((v) => v.split(".").map(Number))
  for (let i = 0; i < 3; i++) if (x![i] !== y![i]) return x![i]! > y![i]!
  return false
}

describe("the release", () => {
  it("is package.json's version, MAJOR.MINOR.PATCH, with the generation its migrations reach", () => {
    expect(version).toMatch(/^\d+\.\d+\.\d+$/)
    expect(RELEASE).toEqual({ version, generation: generationOf(loadMigrations()) })
  })

  it("has its changelog entry, newest first, in the form of Keep a Changelog", () => {
    expect(changelog).toMatch(/^# Changelog\n/)
    expect(changelog).toContain("## [Unreleased]")
    expect(releases[0]).toEqual({ version, date: expect.any(String) })
    for (let i = 1; i < releases.length; i++) {
      expect(newer(releases[i - 1]!.version, releases[i]!.version), releases[i]!.version).toBe(true)
      expect(releases[i - 1]!.date >= releases[i]!.date, releases[i]!.version).toBe(true)
    }
    const sections = [...changelog.matchAll(/^### (.+)$/gm)].map((m) => m[1]!)
    for (const s of sections)
      expect(["Added", "Changed", "Deprecated", "Removed", "Fixed", "Security", "Migrations"]).toContain(s)
  })

  it("names every migration in the changelog, alone or in a range, and every fence a migration raises is a release there", () => {
    const ranges = [...changelog.matchAll(/`sql\/(\d{3})` to `sql\/(\d{3})`/g)].map((m) => [Number(m[1]), Number(m[2])])
    const named = new Set([...changelog.matchAll(/`(?:sql\/)?(\d{3})(?:_[a-z0-9_]+\.sql)?`/g)].map((m) => Number(m[1])))
    for (const m of loadMigrations()) {
      const inRange = ranges.some(([from, to]) => m.number >= from! && m.number <= to!)
      expect(named.has(m.number) || inRange, m.name).toBe(true)
      if (m.fence !== null)
        expect(
          releases.map((r) => r.version),
          `${m.name} fences ${m.fence}`
        ).toContain(m.fence)
    }
  })

  it("is what the process reports, and the webhooks' User-Agent keeps its suffix /1", async () => {
    const m = makeServiceMetrics()
    const info = (await m.registry.prom.getMetricsAsJSON()).find((f) => f.name === "srs_build_info")
    expect(info?.values).toEqual([{ value: 1, labels: { version, generation: String(RELEASE.generation) } }])
    expect(USER_AGENT).toBe("Service-Webhooks/1")
  })
})
