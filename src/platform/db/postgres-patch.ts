// The patches for postgres.js and the check that they are in place (the guard below; the types
// fetch held, the queue, the reserved connection's close and the idle connections' order further down). postgres.js 3.4.9 defers
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

export const CLOSE_MARK = "/* safety-records-service: no error kept past a close */"

/**
 * Two holes in a connection's close. One: closed after the server's error for a statement (a
 * FATAL as the backend is terminated) and before the server said it was ready again, it kept that
 * error, and the pool's next reconnection of the same connection failed its first request with it
 * (a reserve() rejected with the old session's 57P01). Two: a close after a socket error left
 * unsettled the statements written between the error and the close (a transaction's ROLLBACK
 * then waited forever). The patch drops the kept error on close, failing the statement it
 * answered with it, and fails whatever is still waiting whether or not the socket erred.
 */
const patchClose = (text: string): string => {
  if (text.includes(CLOSE_MARK)) return text
  const out = text.replace(
    "    socket = null\n\n    if (initial)\n      return reconnect()\n\n    !hadError && (query || sent.length) && error(Errors.connection('CONNECTION_CLOSED', options, socket))",
    `    socket = null
    ${CLOSE_MARK}
    const answered = errorResponse
    errorResponse = null

    if (initial)
      return reconnect()

    if (query || sent.length)
      error(answered || Errors.connection('CONNECTION_CLOSED', options, socket))`
  )
  if (out === text) throw new Error("postgres.js changed: review src/platform/db/postgres-patch.ts (closed)")
  return out
}

export const TYPES_MARK = "/* safety-records-service: types fetch held */"

/**
 * A new connection's first statement reads the array types, on a promise the driver does not
 * hold. A server gone at that moment (a standby stopped as connections to it open) failed that
 * promise with nobody waiting on it, and Node ends a process for an unhandled rejection. The
 * failure is the connection's: the request that opened it gets it (or the reconnection's), so the
 * patch only holds the promise.
 */
const holdTypesFetch = (text: string): string => {
  if (text.includes(TYPES_MARK)) return text
  const out = text.replace(
    "        return fetchArrayTypes()\n",
    `        return fetchArrayTypes().catch(() => {}) ${TYPES_MARK}\n`
  )
  if (out === text) throw new Error("postgres.js changed: review src/platform/db/postgres-patch.ts (fetchArrayTypes)")
  return out
}

/** The patched text of one connection.js (the guard, patchClose, the types fetch held); throws when the library no longer looks as expected. */
export const patchConnection = (text: string): string => holdTypesFetch(patchClose(patchGuard(text)))

const patchGuard = (text: string): string => {
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
 * The queue's compaction. postgres.js's queue forgets a taken item by leaving a hole
 * at its front and drops the holes only when the queue is empty; a pool's idle-connection queue
 * is never empty under steady load, so it kept a slot for every connection it ever handed out
 * (1.4 MB after five minutes of bench:soak, growing for as long as the process lives, and each
 * `remove` scanning all of it). The patch drops the taken front once it is half the array.
 */
const compactQueue = (text: string): string => {
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

export const LIFO_MARK = "/* safety-records-service: last used first */"

/**
 * Idle connections are handed out last used first (a pop added to queue.js, used by index.js
 * where it takes an idle connection). Shipped, the pool takes the least recently used one, so
 * steady traffic cycles through every idle connection: each statement wakes another PostgreSQL
 * process, cold. bench:stream, three pairs at 200 changes/s: PostgreSQL's CPU 5-9% lower.
 */
const popQueue = (text: string): string => {
  if (text.includes(LIFO_MARK)) return text
  const out = text.replace(
    "    push: (x) => (xs.push(x), x),\n",
    `    push: (x) => (xs.push(x), x),
    ${LIFO_MARK}
    pop: () => {
      const out = index < xs.length ? xs.pop() : undefined
      if (index >= xs.length) {
        index = 0
        xs = []
      }
      return out
    },
`
  )
  if (out === text) throw new Error("postgres.js changed: review src/platform/db/postgres-patch.ts (queue.js pop)")
  return out
}

/** The patched text of one queue.js: compacted, with a pop. */
export const patchQueue = (text: string): string => popQueue(compactQueue(text))

export const RESERVE_MARK = "/* safety-records-service: reserved connection closed */"

const indexFiles = (root: string): ReadonlyArray<string> =>
  FLAVOURS.map((flavour) => join(root, flavour, "index.js")).filter((file) => existsSync(file))

const RESERVE_SHIPPED = `    c.reserved.release = true

    const sql = Sql(handler)
    sql.release = () => {
      c.reserved = null
      onopen(c)
    }

    return sql

    function handler(q) {
      c.queue === full`

/**
 * The patched text of one index.js. A reserved connection (sql.reserve(), under every
 * transaction here) that closes under its holder (the backend terminated, PostgreSQL
 * restarted) goes back to the pool's closed connections, which reconnects it for whoever asks
 * next, while the holder still has it: the holder's next statements (a ROLLBACK) went to that
 * new session or waited for it, its statements queued behind a busy one were never settled, and
 * its release put the connection in the open queue a second time. The patch marks the
 * reservation gone on close: statements queued or issued after fail at once with the closing
 * error, and the release leaves the connection to the pool.
 */
const patchReserve = (text: string): string => {
  if (text.includes(RESERVE_MARK)) return text
  const out = text.replace(
    RESERVE_SHIPPED,
    `    c.reserved.release = true
    ${RESERVE_MARK}
    let gone = null
    c.onclose = e => {
      gone = e
      while (queue.length) queue.shift().reject(e)
    }

    const sql = Sql(handler)
    sql.release = () => {
      if (gone) return
      c.onclose = null
      c.reserved = null
      onopen(c)
    }

    return sql

    function handler(q) {
      if (gone) return q.reject(gone)
      c.queue === full`
  )
  if (out === text) throw new Error("postgres.js changed: review src/platform/db/postgres-patch.ts (index.js)")
  return out
}

/** index.js takes an idle connection last used first (popQueue). */
const lastUsedFirst = (text: string): string => {
  if (text.includes(LIFO_MARK)) return text
  const out = text
    .replace(
      "      ? open.shift()\n      : await new Promise",
      `      ? open.pop() ${LIFO_MARK}\n      : await new Promise`
    )
    .replace("      return go(open.shift(), query)\n", `      return go(open.pop(), query) ${LIFO_MARK}\n`)
  if (out.split(LIFO_MARK).length !== 3)
    throw new Error("postgres.js changed: review src/platform/db/postgres-patch.ts (index.js, idle connections)")
  return out
}

/** The patched text of one index.js: the reserved connection's close, idle connections last used first. */
export const patchIndex = (text: string): string => lastUsedFirst(patchReserve(text))

/** Patches every connection.js, queue.js and index.js of the package at root (idempotent). */
export const applyPostgresPatch = (root: string = installedPostgresRoot()): void => {
  for (const file of connectionFiles(root)) writeFileSync(file, patchConnection(readFileSync(file, "utf8")))
  for (const file of queueFiles(root)) writeFileSync(file, patchQueue(readFileSync(file, "utf8")))
  for (const file of indexFiles(root)) writeFileSync(file, patchIndex(readFileSync(file, "utf8")))
}

/** True when every connection.js of the package at root carries the patch, and every queue.js and
 *  index.js its own (a tree patched before a later patch existed, not installed again since, is not). */
export const postgresPatched = (root: string = installedPostgresRoot()): boolean => {
  const carry = (files: ReadonlyArray<string>, ...marks: ReadonlyArray<string>) =>
    files.every((file) => {
      const text = readFileSync(file, "utf8")
      return marks.every((mark) => text.includes(mark))
    })
  const connections = connectionFiles(root)
  return (
    connections.length > 0 &&
    carry(connections, MARK, CLOSE_MARK, TYPES_MARK) &&
    carry(queueFiles(root), QUEUE_MARK, LIFO_MARK) &&
    carry(indexFiles(root), RESERVE_MARK, LIFO_MARK)
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
