// The operators' side of the quarantine: what status, /metrics and the CLI read, and the
// requests they send to capture through the WAL.
import { Effect } from "effect"
import { resourceOfTable, type Resource } from "../../../domain/resources.ts"
import { appQuery, query } from "../../../platform/db/Sql.ts"
import { QUARANTINE_PREFIX, type QuarantineRequest } from "./markers.ts"

export interface QuarantineEntry {
  readonly id: string
  readonly lsn: string
  readonly table: string
  readonly key: string
  readonly resource: Resource | null
  readonly companyId: string | null
  readonly error: string
  readonly firstSeen: string
  readonly lastSeen: string
  readonly attempts: number
  /** The app table whose contract break holds it, or null. */
  readonly blockedBy: string | null
}

type EntryRow = {
  id: string
  lsn: string
  tbl: string
  key: string
  company_id: string | null
  error: string
  first_seen: Date
  last_seen: Date
  attempts: number
  blocked_by: string | null
}

const toEntry = (r: EntryRow): QuarantineEntry => ({
  id: r.id,
  lsn: r.lsn,
  table: r.tbl,
  key: r.key,
  resource: resourceOfTable(r.tbl) ?? null,
  companyId: r.company_id,
  error: r.error,
  firstSeen: r.first_seen.toISOString(),
  lastSeen: r.last_seen.toISOString(),
  attempts: r.attempts,
  blockedBy: r.blocked_by
})

/** Held records, oldest first (at most `limit`). */
export const listQuarantine = Effect.fn("listQuarantine")(function* (limit = 1000) {
  const rows = yield* query(
    (sql) => sql<EntryRow[]>`
      select q.id::text, lsn::text, tbl, key, company_id::text, error, first_seen, last_seen, attempts, blocked_by
      from service.capture_quarantine q order by q.id limit ${limit}`
  )
  return rows.map(toEntry)
})

/** The entry with this id; null for none, or for text that is not an id. */
export const quarantineEntry = Effect.fn("quarantineEntry")(function* (id: string) {
  if (!/^\d{1,18}$/.test(id)) return null
  const [row] = yield* query(
    (sql) => sql<EntryRow[]>`
      select id::text, lsn::text, tbl, key, company_id::text, error, first_seen, last_seen, attempts, blocked_by
      from service.capture_quarantine where id = ${id}::bigint`
  )
  return row ? toEntry(row) : null
})

/** The entries with these ids still held (the others were released). */
export const quarantineEntries = Effect.fn("quarantineEntries")(function* (ids: ReadonlyArray<string>) {
  const rows = yield* query(
    (sql) => sql<EntryRow[]>`
      select q.id::text, lsn::text, tbl, key, company_id::text, error, first_seen, last_seen, attempts, blocked_by
      from service.capture_quarantine q where q.id = any(${ids as string[]}::bigint[]) order by q.id`
  )
  return rows.map(toEntry)
})

export interface QuarantineSummary {
  /** Records held. */
  readonly count: number
  /** The oldest one's error, with its table and key. */
  readonly first: { readonly id: string; readonly table: string; readonly key: string; readonly error: string } | null
  /** App tables whose contract is broken, each with what does not fit. */
  readonly broken: ReadonlyArray<{
    readonly table: string
    readonly problems: ReadonlyArray<string>
    readonly since: string
  }>
  /** App tables being re-read from the app after their contract held again. */
  readonly resyncing: ReadonlyArray<{ readonly table: string; readonly rows: number; readonly since: string }>
}

export const quarantineSummary = Effect.fn("quarantineSummary")(function* () {
  const [row] = yield* query(
    (sql) => sql<
      {
        count: number
        first: { id: string; tbl: string; key: string; error: string } | null
        broken: Array<{ tbl: string; problems: string[]; since: string }> | null
        resync: Array<{ tbl: string; rows: number; since: string }> | null
      }[]
    >`
      select (select count(*)::int from service.capture_quarantine) as count,
        (select json_build_object('id', f.id::text, 'tbl', tbl, 'key', key, 'error', error)
           from service.capture_quarantine f order by f.id limit 1) as first,
        (select json_agg(json_build_object('tbl', tbl, 'problems', problems, 'since', since) order by tbl)
           from service.capture_contract) as broken,
        (select json_agg(json_build_object('tbl', tbl, 'rows', rows, 'since', started_at) order by tbl)
           from service.capture_resync) as resync`
  )
  const summary: QuarantineSummary = {
    count: row!.count,
    first: row!.first
      ? { id: row!.first.id, table: row!.first.tbl, key: row!.first.key, error: row!.first.error }
      : null,
    broken: (row!.broken ?? []).map((b) => ({
      table: b.tbl,
      problems: b.problems,
      since: new Date(b.since).toISOString()
    })),
    resyncing: (row!.resync ?? []).map((r) => ({
      table: r.tbl,
      rows: Number(r.rows),
      since: new Date(r.since).toISOString()
    }))
  }
  return summary
})

/**
 * Sends a request to capture through the app's WAL (a transactional logical message), in the
 * caller's transaction (with its activity entries) when both are one database; with the
 * service's own database it commits on the app's at once, before the caller's entries commit.
 * Returns the message's LSN: capture has applied it once its checkpoint is past it.
 */
export const sendRequest = (request: QuarantineRequest) =>
  appQuery(
    (sql) => sql<{ lsn: string; at: Date }[]>`
      select pg_logical_emit_message(true, ${QUARANTINE_PREFIX}, ${JSON.stringify(request)})::text as lsn, now() as at`
  ).pipe(Effect.map(([r]) => ({ lsn: r!.lsn, at: r!.at })))

/** Whether capture's checkpoint is at or past `lsn` (the request was applied). */
export const appliedPast = (lsn: string) =>
  query(
    (sql) => sql<{ ok: boolean }[]>`
      select coalesce(bool_or(checkpoint_lsn >= ${lsn}::pg_lsn), false) as ok from service.capture_state`
  ).pipe(Effect.map(([r]) => r?.ok ?? false))

/** The entries of the held records whose table fits, or none blocks (what `retry --all` asks). */
export const retryableEntries = Effect.fn("retryableEntries")(function* () {
  const rows = yield* query(
    (sql) => sql<EntryRow[]>`
      select q.id::text, lsn::text, tbl, key, company_id::text, error, first_seen, last_seen, attempts, blocked_by
      from service.capture_quarantine q
      where q.blocked_by is null or not exists (
        select 1 from service.capture_contract c where c.tbl = q.blocked_by
        union all select 1 from service.capture_resync r where r.tbl = q.blocked_by)
      order by q.id`
  )
  return rows.map(toEntry)
})

/** How many of a company's records the quarantine holds (the admin pages' status). */
export const companyHeldCount = (companyId: string) =>
  Effect.map(
    query(
      (sql) => sql<{ n: number }[]>`
        select count(*)::int as n from service.capture_quarantine where company_id = ${companyId}`
    ),
    ([row]) => row?.n ?? 0
  )
