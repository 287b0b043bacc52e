// Waking the stream's waiting requests (long-poll and event streams: GET /api/v1/stream). One
// LISTEN per process on the channel capture notifies at each batch's commit; each notification
// costs one statement for the whole process, which asks, for the companies that have someone
// waiting, which resources changed past what it last saw (service.record_changes' stream index),
// and wakes in memory only the waiters of those companies and resources. Nothing runs while
// nothing changes. Waiters are bounded per key and per process.
//
// A waiter is registered after a read found nothing, with the company's head (the newest
// change's LSN that read saw). A change committed after that read and before the registration
// would otherwise be missed: registration fails (the caller reads again at once) when a
// notification came in since the read began, or the process already saw a newer change of
// that company.
import type postgres from "postgres"
import { EPOCH_NOTICE, RECORD_CHANGES_CHANNEL } from "../platform/db/channels.ts"

export interface Waiter {
  readonly keyId: string
  readonly companyId: string
  /** The resources it reads (the key's readable ones it asked for). */
  readonly resources: ReadonlySet<string>
  /** The company's newest change its read saw (0 when none). */
  readonly head: bigint
  readonly wake: () => void
}

export interface WakeLimits {
  readonly perKey: number
  readonly total: number
}

export type Registration = { readonly _tag: "Waiting"; readonly cancel: () => void } | { readonly _tag: "ReadAgain" }

export interface StreamWake {
  /** A counter of notifications received: taken before a read, given back at registration. */
  readonly ticket: () => number
  /** A place among the waiting requests, held while a request waits (or an event stream is open); released by the function returned. */
  readonly acquire: (keyId: string) => (() => void) | "key" | "process"
  readonly register: (waiter: Waiter, ticket: number) => Registration
  readonly counts: () => { readonly waiting: number; readonly wakeQueries: number }
  readonly close: () => Promise<void>
}

const lsnOf = (text: string): bigint => {
  const [hi, lo] = text.split("/")
  return (BigInt(`0x${hi}`) << 32n) | BigInt(`0x${lo}`)
}
const lsnText = (lsn: bigint) =>
  `${(lsn >> 32n).toString(16).toUpperCase()}/${(lsn & 0xffffffffn).toString(16).toUpperCase()}`

export const makeStreamWake = async (sql: postgres.Sql, limits: WakeLimits): Promise<StreamWake> => {
  let seq = 0
  let wakeQueries = 0
  let waiting = 0
  const byCompany = new Map<string, Set<Waiter>>()
  const seen = new Map<string, bigint>()
  const perKey = new Map<string, number>()
  let running = false
  let again = false
  let closed = false

  const wakeAll = () => {
    for (const set of byCompany.values()) for (const w of [...set]) w.wake()
  }

  const query = async () => {
    const companies = [...byCompany.keys()]
    if (companies.length === 0) return
    wakeQueries++
    const rows = await sql<{ company: string; resource: string; lsn: string }[]>`
      select c.id::text as company, x.resource, x.lsn::text as lsn
        from unnest(${companies}::uuid[], ${companies.map((c) => lsnText(seen.get(c) ?? 0n))}::pg_lsn[]) as c(id, seen)
        cross join lateral (
          select r.resource, max(r.commit_lsn) as lsn from service.record_changes r
           where r.company_id = c.id and r.commit_lsn > c.seen
           group by r.resource
        ) x`
    for (const row of rows) {
      const lsn = lsnOf(row.lsn)
      if (lsn > (seen.get(row.company) ?? 0n)) seen.set(row.company, lsn)
      const set = byCompany.get(row.company)
      if (set === undefined) continue
      for (const w of [...set]) if (lsn > w.head && w.resources.has(row.resource)) w.wake()
    }
  }

  const run = async () => {
    if (running) {
      again = true
      return
    }
    running = true
    try {
      do {
        again = false
        await query().catch(() => wakeAll())
      } while (again && !closed)
    } finally {
      running = false
    }
  }

  const onNotify = (notice: string) => {
    seq++
    // An epoch (a first start, a lost slot's rebuild, a fresh snapshot, rebuild-views): every
    // waiter's offset may be before it, and its next read says so (409 mustRefetch).
    if (notice === EPOCH_NOTICE) wakeAll()
    else void run()
  }
  // Called again on each reconnect: what changed while the connection was down wakes everyone.
  let listening = false
  const onListen = () => {
    if (listening) {
      seq++
      wakeAll()
    }
    listening = true
  }
  const listener = await sql.listen(RECORD_CHANGES_CHANNEL, onNotify, onListen)

  return {
    ticket: () => seq,
    acquire: (keyId) => {
      if (waiting >= limits.total) return "process"
      const mine = perKey.get(keyId) ?? 0
      if (mine >= limits.perKey) return "key"
      perKey.set(keyId, mine + 1)
      waiting++
      let done = false
      return () => {
        if (done) return
        done = true
        waiting--
        const n = (perKey.get(keyId) ?? 1) - 1
        if (n <= 0) perKey.delete(keyId)
        else perKey.set(keyId, n)
      }
    },
    register: (w, ticket) => {
      if (ticket !== seq) return { _tag: "ReadAgain" }
      const known = seen.get(w.companyId)
      if (known !== undefined && known > w.head) return { _tag: "ReadAgain" }
      let set = byCompany.get(w.companyId)
      if (set === undefined) {
        byCompany.set(w.companyId, (set = new Set()))
        if (known === undefined) seen.set(w.companyId, w.head)
      }
      set.add(w)
      let done = false
      return {
        _tag: "Waiting",
        cancel: () => {
          if (done) return
          done = true
          set.delete(w)
          if (set.size === 0) {
            byCompany.delete(w.companyId)
            seen.delete(w.companyId)
          }
        }
      }
    },
    counts: () => ({ waiting, wakeQueries }),
    close: async () => {
      closed = true
      await listener.unlisten().catch(() => undefined)
    }
  }
}
