// Started as root, the embedded server runs as the user "postgres", which must be able to
// pass through every directory on the way to its binaries and its data.
import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { closedToOthers } from "../../../src/platform/db/embedded.ts"

const root = mkdtempSync(join(tmpdir(), "srs-perm-"))
afterAll(() => rmSync(root, { recursive: true, force: true }))

describe("closedToOthers", () => {
  it("finds the first directory others cannot pass through, with its mode", () => {
    chmodSync(root, 0o755)
    const closed = join(root, "private")
    mkdirSync(join(closed, "app", "node_modules"), { recursive: true })
    chmodSync(closed, 0o700)
    expect(closedToOthers(join(closed, "app", "node_modules"))).toEqual({ dir: closed, mode: "700" })
    chmodSync(closed, 0o711)
    expect(closedToOthers(join(closed, "app", "node_modules"))).toBeUndefined()
  })

  it("lets the owner or the group through when they are the server's user", () => {
    const dir = join(root, "owned")
    mkdirSync(dir)
    chmodSync(dir, 0o700)
    const st = statSync(dir)
    expect(closedToOthers(dir, { uid: st.uid, gid: -1 })).toBeUndefined()
    chmodSync(dir, 0o710)
    expect(closedToOthers(dir, { uid: -1, gid: st.gid })).toBeUndefined()
    expect(closedToOthers(dir, { uid: -1, gid: -1 })).toEqual({ dir, mode: "710" })
  })

  it("a path not made yet is no obstacle (it is made passable)", () => {
    expect(closedToOthers(join(root, "not", "yet"))).toBeUndefined()
  })
})
