// The mirror's rows (service.rows) as the service reads them: through its codec, whichever
// form a row is stored in (src/pipeline/projection/mirror-codec.ts).
import type { Sql } from "postgres"
import type { Row } from "../../src/domain/records/types.ts"
import { decodeMirrorData, encodeMirrorData } from "../../src/pipeline/projection/mirror-codec.ts"

/** A table's mirror rows, decoded, by key. */
export const mirrorRows = async (sql: Sql, tbl: string): Promise<Array<{ key: string; data: Row }>> =>
  (await sql<{ key: string; data: string }[]>`select key, data from service.rows where tbl = ${tbl}`).map((r) => ({
    key: r.key,
    data: decodeMirrorData(tbl, r.data)
  }))

/** Sets one column of a mirror row (as a new release's shaper might find it), written back as the service writes it. */
export const setMirrorValue = async (sql: Sql, tbl: string, key: string, column: string, value: unknown) => {
  const [r] = await sql<{ data: string }[]>`select data from service.rows where tbl = ${tbl} and key = ${key}`
  if (r === undefined) throw new Error(`no mirror row ${tbl} ${key}`)
  const data = { ...decodeMirrorData(tbl, r.data), [column]: value }
  await sql`update service.rows set data = ${encodeMirrorData(tbl, data)} where tbl = ${tbl} and key = ${key}`
}
