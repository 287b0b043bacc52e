// Places in the outbox and its partitions: an event's place is (commit LSN, index in its
// transaction); fan-out reads each of the PARTS partitions after its own cursor.

/** Partitions of the outbox (sql/020: service.webhook_part), each with its own cursor. */
export const PARTS = 12

/** A place in the outbox: (commit LSN, index in the transaction). */
export type Pos = { readonly lsn: string; readonly seq: number }

const lsnValue = (lsn: string): bigint => {
  const [hi, lo] = lsn.split("/")
  return (BigInt(`0x${hi}`) << 32n) | BigInt(`0x${lo}`)
}
/** Negative, zero or positive as a is before, at or after b. */
export const comparePos = (a: Pos, b: Pos): number => {
  const l = lsnValue(a.lsn) - lsnValue(b.lsn)
  return l !== 0n ? (l < 0n ? -1 : 1) : a.seq - b.seq
}
export const maxPos = (a: Pos, b: Pos): Pos => (comparePos(a, b) >= 0 ? a : b)
/** Before every event, and after every event. */
export const START: Pos = { lsn: "0/0", seq: 0 }
export const END: Pos = { lsn: "FFFFFFFF/FFFFFFFF", seq: 2_147_483_647 }
