// A decoded transaction: its commit position and time, and its row changes in order.
import type { Row } from "../../domain/records/types.ts"
import type { Lsn } from "../../platform/db/lsn.ts"
import type { QuarantineMarker } from "./quarantine/markers.ts"

export interface RowChange {
  readonly table: string
  readonly key: string
  /** The new row (values undefined where TOAST was unchanged), or null for a delete. */
  readonly data: Row | null
  /** From an INSERT: the key was not in the app table just before, so not in the mirror either. */
  readonly inserted?: true
  /** A value of the row could not be decoded (left out of `data`): the records it feeds are held. */
  readonly poison?: string
}

export interface Txn {
  readonly xid: number
  /** Commit end LSN: the checkpoint once this transaction is applied. */
  readonly endLsn: Lsn
  readonly commitTime: Date
  readonly changes: ReadonlyArray<RowChange>
  /** Contract changes and operators' requests met in this transaction, in order (quarantine/). */
  readonly markers?: ReadonlyArray<QuarantineMarker>
}
