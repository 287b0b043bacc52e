// Which release this build is: package.json's version (semver, bumped when behaviour changes:
// CHANGELOG.md) and the schema generation its migrations reach (the highest migration number
// in sql/). One home for both: /readyz, /metrics (srs_build_info), `status`, the log, the
// schema fence and the stamp every connection of the service carries.
import { createRequire } from "node:module"
import { generationOf, loadMigrations, RELEASE_PATTERN } from "./db/migrations.ts"

export interface Release {
  /** package.json's version: MAJOR.MINOR.PATCH. */
  readonly version: string
  /** The schema generation this build's migrations reach. */
  readonly generation: number
}

const VERSION: string = (createRequire(import.meta.url)("../../package.json") as { version: string }).version

if (!RELEASE_PATTERN.test(VERSION))
  throw new Error(`package.json's version must be MAJOR.MINOR.PATCH (the schema fence compares them), not "${VERSION}"`)

export const RELEASE: Release = { version: VERSION, generation: generationOf(loadMigrations()) }

/** Compares two releases (MAJOR.MINOR.PATCH): negative when a is older than b. */
export const compareReleases = (a: string, b: string): number => {
  const pa = a.split(".").map(Number)
  const pb = b.split(".").map(Number)
  for (let i = 0; i < 3; i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0)
    if (d !== 0) return d
  }
  return 0
}
