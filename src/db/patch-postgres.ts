// Run by `npm install` (postinstall). postgres.js 3.4.9 defers small writes behind a
// setImmediate; when the server goes away first, that callback writes to a null socket and
// throws an uncatchable TypeError that kills the process, and its teardown leaves a stale
// timer that stops the connection from ever writing again (porsager/postgres #1154, #1208;
// fix proposed in #1209, not released). Both happen whenever PostgreSQL restarts, which
// this service must survive. The patch is idempotent and checks that it applied.
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { createRequire } from "node:module"

// The package main is cjs/src/index.js: its root is three levels up.
const root = dirname(dirname(dirname(createRequire(import.meta.url).resolve("postgres"))))
const MARK = "/* safety-records-service: guarded nextWrite */"

const patch = (text: string): string => {
  if (text.includes(MARK)) return text
  const out = text
    .replace(
      "function nextWrite(fn) {\n    const x = socket.write(chunk, fn)",
      `function nextWrite(fn) {
    ${MARK}
    if (!socket) {
      nextWriteTimer !== null && clearImmediate(nextWriteTimer)
      chunk = nextWriteTimer = null
      error(Errors.connection('CONNECTION_CLOSED', options))
      return false
    }
    const x = socket.write(chunk, fn)`
    )
    // terminate() and closed() cancel the timer but leave it set: clear it and the chunk.
    .replace(/^    clearImmediate\(nextWriteTimer\)$/gm, "    clearImmediate(nextWriteTimer), nextWriteTimer = null, chunk = null")
  if (!out.includes(MARK) || out === text) throw new Error("postgres.js changed: review src/db/patch-postgres.ts")
  return out
}

for (const flavour of ["src", "cjs/src", "cf/src"]) {
  const file = join(root, flavour, "connection.js")
  if (!existsSync(file)) continue
  writeFileSync(file, patch(readFileSync(file, "utf8")))
}
