// A follower of the record changes, as GET /api/v1/stream's clients follow them: it reads what
// came after its offset at points of a history (capture running or not), copies every view
// again when an epoch passes its offset (the stream's 409 mustRefetch), and applies each change
// by resource and id. The stream's promise is that such a copy misses nothing: at the end it
// must equal the views. Compaction may fold several changes into one, or none when a batch left
// a record as it was; a view changed without a change after the follower's offset is a miss.
import type postgres from "postgres"
import { formatLsn, parseLsn } from "../../../src/platform/db/lsn.ts"

/** The stream's order: commit LSN, order in the batch, resource (bytewise), id. */
type Place = readonly [bigint, number, string, string]

const NIL = "00000000-0000-0000-0000-000000000000"
const compare = (a: Place, b: Place): number => {
  if (a[0] !== b[0]) return a[0] < b[0] ? -1 : 1
  if (a[1] !== b[1]) return a[1] - b[1]
  if (a[2] !== b[2]) return a[2] < b[2] ? -1 : 1
  return a[3] === b[3] ? 0 : a[3] < b[3] ? -1 : 1
}
/** An epoch's start sorts after every change of its LSN (they are dropped with it). */
const epochPlace = (lsn: string): Place => [parseLsn(lsn), 2147483647, "", NIL]

interface Change {
  readonly lsn: string
  readonly ord: number
  readonly resource: string
  readonly id: string
  readonly op: "upsert" | "delete"
  readonly body: string | null
  /** committedAt, in ms: it never goes back along the stream. */
  readonly ms: number
}

export class Follower {
  private at: Place | undefined
  private readonly copy = new Map<string, string>()
  /** The last change's committedAt, and where it went back (a follower sees it). */
  private lastMs = 0
  private readonly backwards: string[] = []
  reads = 0
  refetches = 0
  private readonly sql: postgres.Sql
  constructor(sql: postgres.Sql) {
    this.sql = sql
  }

  /** The commit LSN of the last change read (0 before any). */
  get offsetLsn(): bigint {
    return this.at?.[0] ?? 0n
  }

  /** One read, in one snapshot, as a stream answer is one statement; `limit`: a page of at most that many. */
  async read(limit?: number): Promise<void> {
    this.reads++
    await this.sql.begin("isolation level repeatable read read only", async (tx) => {
      const [e] = await tx<{ lsn: string | null }[]>`select max(checkpoint_lsn)::text as lsn from service.stream_epochs`
      const epoch = e?.lsn == null ? undefined : epochPlace(e.lsn)
      if (this.at === undefined || (epoch !== undefined && compare(this.at, epoch) < 0)) {
        // Copy again, then follow from the present (`after=now`).
        this.refetches++
        this.copy.clear()
        this.lastMs = 0
        const views = await tx<
          { k: string; body: string }[]
        >`select resource || '/' || id as k, body from service.views`
        for (const v of views) this.copy.set(v.k, v.body)
        const [h] = await tx<Change[]>`
          select commit_lsn::text as lsn, ord, resource, id::text as id from service.record_changes
          order by commit_lsn desc, ord desc, resource collate "C" desc, id desc limit 1`
        const head: Place | undefined = h === undefined ? undefined : [parseLsn(h.lsn), h.ord, h.resource, h.id]
        this.at =
          head === undefined
            ? (epoch ?? [0n, -1, "", NIL])
            : epoch === undefined || compare(head, epoch) > 0
              ? head
              : epoch
        return
      }
      const [lsn, ord, resource, id] = this.at
      const changes = await tx<Change[]>`
        select r.commit_lsn::text as lsn, r.ord, r.resource, r.id::text as id, r.op, v.body,
               (extract(epoch from r.committed_at) * 1000)::float8 as ms
          from service.record_changes r
          left join service.views v on r.op = 'upsert' and v.resource = r.resource and v.id = r.id
         where (r.commit_lsn, r.ord, r.resource collate "C", r.id) > (${formatLsn(lsn)}::pg_lsn, ${ord}::int, ${resource}::text collate "C", ${id}::uuid)
         order by r.commit_lsn, r.ord, r.resource collate "C", r.id
         ${limit === undefined ? tx`` : tx`limit ${limit}`}`
      for (const c of changes) {
        const k = `${c.resource}/${c.id}`
        if (c.ms < this.lastMs)
          this.backwards.push(
            `stream follower: ${k}'s committedAt (${c.ms}) is before the change read before it (${this.lastMs})`
          )
        this.lastMs = c.ms
        if (c.op === "upsert" && c.body !== null) this.copy.set(k, c.body)
        else this.copy.delete(k)
        this.at = [parseLsn(c.lsn), c.ord, c.resource, c.id]
      }
    })
  }

  /** Where the copy differs from the views (read last, once capture has settled). */
  async misses(): Promise<string[]> {
    await this.read()
    const views = await this.sql<
      { k: string; body: string }[]
    >`select resource || '/' || id as k, body from service.views`
    const out: string[] = [...this.backwards]
    const seen = new Set<string>()
    for (const v of views) {
      seen.add(v.k)
      const mine = this.copy.get(v.k)
      if (mine === undefined) out.push(`stream follower: ${v.k} has a view, but no change brought it`)
      else if (mine !== v.body) out.push(`stream follower: ${v.k}'s copy is not its view (a change was missed)`)
    }
    for (const k of this.copy.keys())
      if (!seen.has(k)) out.push(`stream follower: ${k} has no view, but no change removed it from the copy`)
    return out
  }
}
