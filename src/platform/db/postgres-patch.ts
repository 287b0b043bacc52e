// The guard patch for postgres.js and the check that it is in place. postgres.js 3.4.9 defers
// small writes behind a setImmediate; when the server goes away first, that callback writes to
// a null socket and throws an uncatchable TypeError that kills the process, and its teardown
// leaves a stale timer that stops the connection from ever writing again (porsager/postgres
// #1154, #1208; fix proposed in #1209, not released). Both happen whenever PostgreSQL restarts,
// which this service must survive. `npm install` applies the patch (src/platform/db/patch-postgres.ts,
// the postinstall script); an install with --ignore-scripts skips it, so the service and the
// CLIs check at start (postgresPatched) and refuse to run without it. Importing this module
// changes nothing: only patch-postgres.ts writes.
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { StartRefused } from "./refusal.ts"

/** The installed postgres package; its main is cjs/src/index.js, three levels down. */
export const installedPostgresRoot = (): string =>
  dirname(dirname(dirname(createRequire(import.meta.url).resolve("postgres"))))

export const MARK = "/* safety-records-service: guarded nextWrite */"

// The package ships the same connection.js for ESM, CommonJS and Cloudflare Workers.
const FLAVOURS = ["src", "cjs/src", "cf/src"]

const connectionFiles = (root: string): ReadonlyArray<string> =>
  FLAVOURS.map((flavour) => join(root, flavour, "connection.js")).filter((file) => existsSync(file))

/** The patched text of one connection.js; throws when the library no longer looks as expected. */
export const patchConnection = (text: string): string => {
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
    .replace(
      /^ {4}clearImmediate\(nextWriteTimer\)$/gm,
      "    clearImmediate(nextWriteTimer), nextWriteTimer = null, chunk = null"
    )
  if (!out.includes(MARK) || out === text)
    throw new Error("postgres.js changed: review src/platform/db/postgres-patch.ts")
  return out
}

export const QUEUE_MARK = "/* safety-records-service: compacted queue */"

const queueFiles = (root: string): ReadonlyArray<string> =>
  FLAVOURS.map((flavour) => join(root, flavour, "queue.js")).filter((file) => existsSync(file))

/**
 * The patched text of one queue.js. postgres.js's queue forgets a taken item by leaving a hole
 * at its front and drops the holes only when the queue is empty; a pool's idle-connection queue
 * is never empty under steady load, so it kept a slot for every connection it ever handed out
 * (1.4 MB after five minutes of bench:soak, growing for as long as the process lives, and each
 * `remove` scanning all of it). The patch drops the taken front once it is half the array.
 */
export const patchQueue = (text: string): string => {
  if (text.includes(QUEUE_MARK)) return text
  const out = text.replace(
    "      } else {\n        xs[index - 1] = undefined\n      }",
    `      } else {
        xs[index - 1] = undefined
        ${QUEUE_MARK}
        if (index >= 64 && index * 2 >= xs.length) {
          xs = xs.slice(index)
          index = 0
        }
      }`
  )
  if (out === text) throw new Error("postgres.js changed: review src/platform/db/postgres-patch.ts (queue.js)")
  return out
}

/** Patches every connection.js and queue.js of the package at root (idempotent). */
export const applyPostgresPatch = (root: string = installedPostgresRoot()): void => {
  for (const file of connectionFiles(root)) writeFileSync(file, patchConnection(readFileSync(file, "utf8")))
  for (const file of queueFiles(root)) writeFileSync(file, patchQueue(readFileSync(file, "utf8")))
}

/** True when every connection.js of the package at root carries the patch, and every queue.js its own
 *  (a tree patched before the queue patch existed, not installed again since, is not patched). */
export const postgresPatched = (root: string = installedPostgresRoot()): boolean => {
  const files = connectionFiles(root)
  return (
    files.length > 0 &&
    files.every((file) => readFileSync(file, "utf8").includes(MARK)) &&
    queueFiles(root).every((file) => readFileSync(file, "utf8").includes(QUEUE_MARK))
  )
}

export const POSTGRES_NOT_PATCHED =
  "postgres.js is not patched (did npm install or npm ci run with --ignore-scripts?): without the patch, " +
  "a PostgreSQL restart can crash this process. Run `npm run postinstall` (it runs `node src/platform/db/patch-postgres.ts`) " +
  "or `npm rebuild` in the project's folder, then start again."

/** Throws, with what to do, unless the installed postgres.js is patched. */
export const requirePostgresPatched = (root?: string): void => {
  if (!postgresPatched(root)) throw new StartRefused({ message: POSTGRES_NOT_PATCHED })
}
