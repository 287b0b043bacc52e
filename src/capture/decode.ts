// pgoutput messages into row changes of the app tables, values in the mirror's normal form.
import type { MessageDelete, MessageInsert, MessageRelation, MessageUpdate } from "pg-logical-replication/dist/output-plugins/pgoutput/pgoutput.types.js"
import { rowKey, TABLES } from "../projection/tables.ts"
import { normalizeRow } from "./normalize.ts"
import type { RowChange } from "./txn.ts"

const typeCache = new WeakMap<MessageRelation, Map<string, number>>()
const typesOf = (rel: MessageRelation) => {
  let m = typeCache.get(rel)
  if (!m) typeCache.set(rel, (m = new Map(rel.columns.map((c) => [c.name, c.typeOid]))))
  return m
}

/** The change, or null for a table the service does not follow. */
export const decodeChange = (msg: MessageInsert | MessageUpdate | MessageDelete): RowChange | null => {
  const rel = msg.relation
  if (rel.schema !== "app" || !(rel.name in TABLES)) return null
  if (msg.tag === "delete") {
    const key = normalizeRow((msg.key ?? msg.old ?? {}) as Record<string, unknown>, typesOf(rel))
    return { table: rel.name, key: rowKey(rel.name, key), data: null }
  }
  const data = normalizeRow(msg.new as Record<string, unknown>, typesOf(rel))
  return { table: rel.name, key: rowKey(rel.name, data), data }
}
