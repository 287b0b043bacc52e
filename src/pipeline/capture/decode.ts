// pgoutput messages into row changes of the app tables. Their values are in the mirror's
// normal form already: src/pipeline/capture/pgoutput.ts reads them so.
import type {
  MessageDelete,
  MessageInsert,
  MessageRelation,
  MessageUpdate
} from "pg-logical-replication/dist/output-plugins/pgoutput/pgoutput.types.js"
import { NEVER_COLUMNS } from "../../domain/records/index.ts"
import { rowKey, TABLES } from "../projection/tables.ts"
import type { RowChange } from "./txn.ts"

const checked = new WeakSet<MessageRelation>()
const checkColumns = (rel: MessageRelation) => {
  if (!checked.has(rel)) {
    // The publication is checked at start; should it be altered while capture runs to carry a
    // NEVER column, a new Relation message shows it before any row of that table: stop before
    // storing a value. A column the service does not read otherwise (a renamed one) is passed
    // over by the reader (pgoutput.ts), and its table's records are held (quarantine/).
    const never = NEVER_COLUMNS[rel.name] ?? []
    const extra = rel.columns.map((c) => c.name).filter((c) => never.includes(c))
    if (extra.length > 0) {
      throw new Error(
        `the change stream carries ${extra.map((c) => `app.${rel.name}.${c}`).join(", ")}, which is NEVER sent ` +
          `(was the publication altered?); capture stops before storing any of it and checks the publication again`
      )
    }
    checked.add(rel)
  }
}

/**
 * The row changes a message makes: none for a table the service does not follow; for an
 * UPDATE that changed the primary key (pgoutput then sends the old key), the row under its
 * old key goes and the row under the new one comes.
 */
export const decodeChange = (msg: MessageInsert | MessageUpdate | MessageDelete): ReadonlyArray<RowChange> => {
  const rel = msg.relation
  if (rel.schema !== "app" || !(rel.name in TABLES)) return []
  checkColumns(rel)
  if (msg.tag === "delete") {
    const key = (msg.key ?? msg.old ?? {}) as Record<string, unknown>
    return [{ table: rel.name, key: rowKey(rel.name, key), data: null }]
  }
  const data = msg.new as Record<string, unknown>
  const poison = (msg as { poison?: string }).poison
  const change: RowChange =
    poison !== undefined
      ? { table: rel.name, key: rowKey(rel.name, data), data, poison }
      : msg.tag === "insert"
        ? { table: rel.name, key: rowKey(rel.name, data), data, inserted: true }
        : { table: rel.name, key: rowKey(rel.name, data), data }
  const before = msg.tag === "update" ? (msg.key ?? msg.old) : null // the old key, or the old row (REPLICA IDENTITY FULL)
  if (before !== null && before !== undefined) {
    const old = rowKey(rel.name, before as Record<string, unknown>)
    if (old !== change.key) return [{ table: rel.name, key: old, data: null }, change]
  }
  return [change]
}
