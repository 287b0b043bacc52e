// bench/bare-follower: the floor under bench:stream's part 1. A process that does the least any
// design of the stream must do: it follows the app's WAL (pgoutput, a slot of its own, the
// service's publication) and answers a waiting long-poll with the ids of the incidents each
// commit inserted, the moment the commit message arrives. Nothing is shaped, stored, checked
// or authorised. Run beside the service, on the same cores, it shows what the machine alone
// adds between the app's commit and a waiting client. With `write`, each commit's ids are first
// stored (one insert, committed asynchronously as capture's batches are), to tell a round trip
// to the database from the rest of capture's work.
//
//   node bench/bare-follower.ts <database url> <slot> <publication> <port> [write]
//   GET /?after=<n>  →  {"items": [{"id", "committedAt"}], "next": <n'>} (committedAt: the
//   commit's time in ms since the epoch, from the WAL; waits up to 30 s for a commit past n)
import { createServer, type ServerResponse } from "node:http"
import { LogicalReplicationService, PgoutputPlugin } from "pg-logical-replication"
import postgres from "postgres"
import type { Message } from "pg-logical-replication/dist/output-plugins/pgoutput/pgoutput.types.js"

const [url, slot, publication, port, mode] = process.argv.slice(2)
if (url === undefined || slot === undefined || publication === undefined || port === undefined)
  throw new Error("usage: bare-follower.ts <database url> <slot> <publication> <port> [write]")
const sql = mode === "write" ? postgres(url, { max: 2, onnotice: () => {} }) : null
if (sql !== null) await sql`create table if not exists bench_bare_log (at pg_lsn, ids text[])`
// Commits stored in order, one at a time (as capture's batches are).
let storing = Promise.resolve()

// Every insert committed so far, in commit order (a bench run's few thousand).
const log: Array<{ id: string; committedAt: number }> = []
let pending: Array<string> = []
let commitTime = 0
const waiting = new Set<{ after: number; res: ServerResponse; timer: NodeJS.Timeout }>()

const answer = (after: number, res: ServerResponse) => {
  res.writeHead(200, { "content-type": "application/json" })
  res.end(JSON.stringify({ items: log.slice(after), next: log.length }))
}

const replication = new LogicalReplicationService(
  { connectionString: url, application_name: "bench-bare-follower" },
  { acknowledge: { auto: true, timeoutSeconds: 1 } }
)
const wakeAll = () => {
  for (const w of waiting) {
    clearTimeout(w.timer)
    answer(w.after, w.res)
  }
  waiting.clear()
}
replication.on("data", (lsn: string, msg: Message) => {
  if (msg.tag === "begin") commitTime = Number(msg.commitTime) / 1000
  else if (msg.tag === "insert" && msg.relation.name === "incidents") pending.push(String(msg.new.id))
  else if (msg.tag === "commit" && pending.length > 0) {
    const items = pending.map((id) => ({ id, committedAt: commitTime }))
    pending = []
    if (sql === null) {
      log.push(...items)
      return wakeAll()
    }
    const db = sql
    storing = storing.then(async () => {
      await db.begin(async (tx) => {
        await tx`set local synchronous_commit = off`
        await tx`insert into bench_bare_log values (${lsn}::pg_lsn, ${items.map((i) => i.id)})`
      })
      log.push(...items)
      wakeAll()
    })
  }
})
replication.on("error", (e: Error) => {
  console.error(`bare follower: ${e.message}`)
  process.exit(1)
})
void replication.subscribe(new PgoutputPlugin({ protoVersion: 1, publicationNames: [publication] }), slot)

createServer((req, res) => {
  const after = Number(new URL(req.url ?? "/", "http://x").searchParams.get("after") ?? 0)
  if (log.length > after) return answer(after, res)
  const w = {
    after,
    res,
    timer: setTimeout(() => {
      waiting.delete(w)
      answer(after, res)
    }, 30_000)
  }
  waiting.add(w)
}).listen(Number(port), "127.0.0.1")
