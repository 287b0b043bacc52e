// The mirror's rows as the service reads them: stored in service.rows (through its codec,
// whichever form a row is stored in: src/pipeline/projection/mirror-codec.ts), or the rows the
// views of view-backed tables stand for (src/pipeline/projection/by-view.ts).
import type { Sql } from "postgres"
import type { Row } from "../../src/domain/records/types.ts"
import { decodeStoredRow, VIEW_BACKED } from "../../src/pipeline/projection/by-view.ts"
import { encodeMirrorData } from "../../src/pipeline/projection/mirror-codec.ts"

type Stored = { key: string; company_id: string | null; data: string }

const read = (sql: Sql, tbl: string, key: string | null) => {
  const resource = VIEW_BACKED.get(tbl) ?? null
  return sql<Stored[]>`
    select key, company_id, data from service.rows where tbl = ${tbl} and (${key}::text is null or key = ${key}::text)
    union all
    select v.id::text, v.company_id, 'v' || v.body from service.views v
     where v.resource = ${resource} and (${key}::text is null or v.id::text = ${key}::text)
       and not exists (select 1 from service.rows r where r.tbl = ${tbl} and r.key = v.id::text)`
}

/** A table's mirror rows, decoded, by key. */
export const mirrorRows = async (sql: Sql, tbl: string): Promise<Array<{ key: string; data: Row }>> =>
  (await read(sql, tbl, null)).map((r) => ({ key: r.key, data: decodeStoredRow(tbl, r.key, r.data, r.company_id) }))

/** Keys of a table's rows the mirror stores in service.rows (not those a view stands for). */
export const storedKeys = async (sql: Sql, tbl: string): Promise<string[]> =>
  (await sql<{ key: string }[]>`select key from service.rows where tbl = ${tbl} order by key`).map((r) => r.key)

/** Sets one column of a mirror row (as a new release's shaper might find it), written back as the service writes it. */
export const setMirrorValue = async (sql: Sql, tbl: string, key: string, column: string, value: unknown) => {
  const [r] = await read(sql, tbl, key)
  if (r === undefined) throw new Error(`no mirror row ${tbl} ${key}`)
  const data = { ...decodeStoredRow(tbl, key, r.data, r.company_id), [column]: value }
  await sql`
    insert into service.rows (tbl, key, company_id, parent_id, data)
    select ${tbl}, ${key}, company_id, parent_id, ${encodeMirrorData(tbl, data)}
      from (select ${r.company_id}::uuid as company_id, null::uuid as parent_id) x
    on conflict (tbl, key) do update set data = excluded.data`
}
