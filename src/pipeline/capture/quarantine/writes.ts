// The quarantine's statements for a batch, in its transaction (after the checkpoint's).
import type { TransactionSql } from "postgres"
import { withoutPersonalDetails } from "../../../domain/records/incidents.ts"
import { RESOURCE_INFO } from "../../../domain/resources.ts"
import { formatLsn } from "../../../platform/db/lsn.ts"
import { deltaIsEmpty, type QuarantineDelta } from "./state.ts"

/** (table, key) pairs as the two arrays a statement unnests; null for none. */
const pairs = (rows: ReadonlyArray<readonly [string, string]> | undefined) =>
  rows === undefined || rows.length === 0 ? null : { tbl: rows.map(([t]) => t), key: rows.map(([, k]) => k) }

/** Deletes the rows of a capture table keyed by (tbl, key) named by `p`. */
const deleteKeyed = (
  tx: TransactionSql<Record<string, unknown>>,
  table: "service.capture_quarantine" | "service.capture_rereads",
  p: { tbl: string[]; key: string[] }
) =>
  tx`
    delete from ${tx(table)} x
    using unnest(${p.tbl}::text[], ${p.key}::text[]) as d(tbl, key)
    where x.tbl = d.tbl and x.key = d.key`

/** The quarantine's statements for a batch, in its transaction (after the checkpoint's). */
export const quarantineWrites = (delta: QuarantineDelta) => {
  if (deltaIsEmpty(delta)) return null
  const released = pairs(delta.released.map((r) => [RESOURCE_INFO[r.resource].table, r.id] as const))
  const held =
    delta.held.length > 0
      ? JSON.stringify(
          delta.held.map((h) => ({
            lsn: formatLsn(h.lsn),
            tbl: h.table,
            key: h.ref.id,
            company_id: h.companyId,
            // '' for "keeps its error" (a record held again): the inserted row's value must not be null.
            error: h.error ?? "",
            // Compared only by the event rules: an incident's person's details are not kept.
            before:
              h.before === null || h.before === undefined
                ? null
                : JSON.stringify(h.table === "incidents" ? withoutPersonalDetails(h.before) : h.before),
            blocked_by: h.info.blockedBy,
            source_tbl: h.info.source?.[0] ?? null,
            source_key: h.info.source?.[1] ?? null
          }))
        )
      : null
  const { contract, resync } = delta
  const retries = delta.retries ?? null
  const met = pairs(delta.rereadsMet)
  const asked = pairs(delta.rereadsAsked)
  return async (tx: TransactionSql<Record<string, unknown>>) => {
    // Released first: a record discarded and held again in one batch starts a new entry.
    if (released !== null) await deleteKeyed(tx, "service.capture_quarantine", released)
    // Held again: the entry keeps what it owes (its row when it was first held) and its first LSN.
    if (held !== null) {
      await tx`
        insert into service.capture_quarantine (lsn, tbl, key, company_id, error, before, blocked_by, source_tbl, source_key)
        select lsn, tbl, key, company_id, error, before, blocked_by, source_tbl, source_key
        from json_to_recordset(${held}::text::json)
          as x(lsn pg_lsn, tbl text, key text, company_id uuid, error text, before text, blocked_by text,
               source_tbl text, source_key text)
        on conflict (tbl, key) do update set error = coalesce(nullif(excluded.error, ''), service.capture_quarantine.error), last_seen = now(),
          attempts = service.capture_quarantine.attempts + 1, blocked_by = excluded.blocked_by,
          source_tbl = excluded.source_tbl, source_key = excluded.source_key,
          company_id = coalesce(excluded.company_id, service.capture_quarantine.company_id)`
    }
    for (const c of contract) {
      if (c.problems === null) await tx`delete from service.capture_contract where tbl = ${c.table}`
      else
        await tx`
          insert into service.capture_contract (tbl, problems, lsn) values (${c.table}, ${c.problems as string[]}, ${formatLsn(c.lsn)}::pg_lsn)
          on conflict (tbl) do update set problems = excluded.problems`
    }
    for (const r of resync) {
      if (r.after === null) await tx`delete from service.capture_resync where tbl = ${r.table}`
      else if (r.after === "")
        await tx`
          insert into service.capture_resync (tbl) values (${r.table})
          on conflict (tbl) do update set after_key = '', rows = 0, started_at = now()`
      else
        await tx`update service.capture_resync set after_key = ${r.after}, rows = rows + ${r.rows} where tbl = ${r.table}`
    }
    // The retries still queued: a restart goes on from here (state.ts, CaptureQuarantine.load).
    if (retries !== null) {
      if (retries.length === 0) await tx`delete from service.capture_retries`
      else
        await tx`
          insert into service.capture_retries (work) values (${JSON.stringify(retries)}::text::jsonb)
          on conflict (id) do update set work = excluded.work`
    }
    // Rows re-read: met first, so that a row read and asked again in one batch stays asked.
    if (met !== null) await deleteKeyed(tx, "service.capture_rereads", met)
    if (asked !== null) {
      await tx`
        insert into service.capture_rereads (tbl, key)
        select * from unnest(${asked.tbl}::text[], ${asked.key}::text[]) on conflict do nothing`
    }
  }
}
