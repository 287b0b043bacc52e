// Where a read runs: on a hot standby (READ_DATABASE_URL) when one is within READ_MAX_LAG,
// else on the primary, as before. A standby's copy of the key may be behind, and a revoked
// key must be refused at once: so while the statement runs on the standby, the key's check
// runs on the primary (one statement for every request of the same turn, batch.ts), and the
// primary decides. Its refusal is the answer; when the standby refused a key the primary
// accepts, or read with scopes or modules the primary no longer has (the standby is behind
// on them), the read runs again on the primary. A standby that fails (down, a query
// cancelled by replay) is skipped and the read runs on the primary: the client never sees it.
import type postgres from "postgres"
import type { Resource } from "../domain/resources.ts"
import { keyStateSql, type KeyState } from "../access/keys/key-check.ts"
import type { ReadReplicasShape, Replica } from "../platform/db/read-replicas.ts"
import { makeBatcher } from "./batch.ts"
import type { Served } from "./served.ts"

/** The pools a read runs on: generic plans (the hot path) and plans made for the parameters. */
export interface ReadDb {
  readonly sql: postgres.Sql
  readonly planned: postgres.Sql
}

/** The key as a standby's statement saw it, for reads that filter by its scopes and modules. */
export interface KeySeen {
  readonly k_scopes: ReadonlyArray<string> | null
  readonly c_modules: ReadonlyArray<string> | null
}

/** A read on one database; `seen` is told the key's scopes and modules its statement used, if any. */
export type ReadOn<E> = (db: ReadDb, seen: (key: KeySeen) => void) => Promise<Served<E>>

export interface KeyRef {
  readonly keyId: string
  readonly host: string | undefined
}

interface CheckItem extends KeyRef {
  readonly resource: Resource | undefined
}

interface CheckRow {
  readonly state: KeyState
  readonly k_scopes: ReadonlyArray<string> | null
  readonly c_modules: ReadonlyArray<string> | null
}

const CHECK_BATCH = `
  select r.n::int as n, s.state, s.k_scopes, s.c_modules
    from unnest($1::uuid[], $2::text[], $3::text[]) with ordinality as r(key_id, host, resource, n)
   cross join lateral ${keyStateSql("r.key_id", "r.host", "r.resource")}`

const GONE: CheckRow = { state: "unknown", k_scopes: null, c_modules: null }

const sameSet = (a: ReadonlyArray<string> | null, b: ReadonlyArray<string> | null) => {
  if (a === null || b === null) return a === b
  if (a.length !== b.length) return false
  const set = new Set(a)
  return b.every((x) => set.has(x))
}

export interface ReadRouter {
  readonly run: <E>(key: KeyRef, resource: Resource | undefined, read: ReadOn<E>) => Promise<Served<E>>
}

const ignore = () => {}

export const makeReadRouter = (primary: ReadDb, replicas: ReadReplicasShape): ReadRouter => {
  const counts = replicas.counts
  const checks = makeBatcher(async (items: ReadonlyArray<CheckItem>) => {
    const rows = await primary.sql.unsafe<Array<CheckRow & { n: number }>>(
      CHECK_BATCH,
      [items.map((i) => i.keyId), items.map((i) => i.host ?? null), items.map((i) => i.resource ?? null)],
      { prepare: true }
    )
    const answers = new Array<CheckRow>(items.length).fill(GONE)
    for (const row of rows) answers[row.n - 1] = row
    return answers
  }, 64)

  const onPrimary = <E>(read: ReadOn<E>) => {
    counts.primary++
    return read(primary, ignore)
  }

  const onReplica = async <E>(
    replica: Replica,
    key: KeyRef,
    resource: Resource | undefined,
    read: ReadOn<E>
  ): Promise<Served<E>> => {
    let seen: KeySeen | undefined
    const [check, served] = await Promise.all([
      checks.load({ keyId: key.keyId, host: key.host, resource }),
      // A standby that stops answering leaves its reads waiting on dead connections: they go
      // to the primary as soon as its probe finds it lost.
      new Promise<Served<E>>((resolve, reject) => {
        const off = replica.onLost(() => reject(new Error("standby lost")))
        read({ sql: replica.sql, planned: replica.planned }, (k) => {
          seen = k
        }).then(
          (s) => {
            off()
            resolve(s)
          },
          (e: unknown) => {
            off()
            reject(e)
          }
        )
      }).then(
        (s) => s,
        () => {
          replica.failed()
          return undefined
        }
      )
    ])
    if (check.state !== "ok") return { _tag: "Refused", state: check.state }
    if (served === undefined) {
      counts.fallbackError++
      return onPrimary(read)
    }
    if (
      served._tag === "Refused" ||
      (seen !== undefined && !(sameSet(seen.k_scopes, check.k_scopes) && sameSet(seen.c_modules, check.c_modules)))
    ) {
      counts.fallbackKey++
      return onPrimary(read)
    }
    counts.replica++
    return served
  }

  return {
    // Without a usable standby, the read itself: nothing added to the hot path but the pick.
    run: (key, resource, read) => {
      const replica = replicas.pick()
      return replica === undefined ? onPrimary(read) : onReplica(replica, key, resource, read)
    }
  }
}
