// What a committed batch changed in the quarantine, said in the log once (docs/operations.md
// has the lines): tables that stopped or started fitting, records held (the first 20 of a
// batch: a broken table can hold many at once) and released, tables read again.
import { formatLsn } from "../../../platform/db/lsn.ts"
import type { Tell } from "../options.ts"
import { deltaIsEmpty, type QuarantineDelta } from "./state.ts"

export const reportDelta = (tell: Tell, delta: QuarantineDelta): void => {
  if (deltaIsEmpty(delta)) return
  for (const c of delta.contract) {
    if (c.problems === null) tell("info", "capture contract: app table fits again", { table: `app.${c.table}` })
    else
      tell("error", "capture contract: app table no longer fits what the service reads; its records are held", {
        table: `app.${c.table}`,
        problems: c.problems
      })
  }
  for (const h of delta.held.slice(0, 20))
    tell("warn", "capture quarantine: record held", {
      table: h.table,
      key: h.ref.id,
      companyId: h.companyId,
      lsn: formatLsn(h.lsn),
      error: h.error,
      blockedBy: h.info.blockedBy
    })
  if (delta.held.length > 20) tell("warn", "capture quarantine: more records held", { records: delta.held.length - 20 })
  if (delta.released.length > 0)
    tell("info", "capture quarantine: records released", { records: delta.released.length })
  for (const r of delta.resync) {
    if (r.after === "") tell("info", "capture resync: re-reading app table", { table: `app.${r.table}` })
    else if (r.after === null) tell("info", "capture resync: app table re-read", { table: `app.${r.table}` })
  }
}
