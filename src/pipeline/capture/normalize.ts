// One normal form for app row values, whether they come from the WAL (pgoutput text via
// pg-types) or from a snapshot read (postgres.js): what the mirror stores and shapers read.
const NUMERIC_OIDS = new Set([20, 21, 23, 700, 701, 1700]) // int8, int2, int4, float4, float8, numeric

export const normalizeValue = (value: unknown, typeOid?: number): unknown => {
  if (value === null || value === undefined) return null
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? null : value.toISOString()
  // pg-types reads a timestamp or date of "infinity" / "-infinity" (and float infinities) as
  // a number: no ISO or JSON form, so "no bound", as the snapshot path reads them.
  if (typeof value === "number" && !Number.isFinite(value)) return null
  if (typeOid !== undefined && NUMERIC_OIDS.has(typeOid) && typeof value === "string") {
    const n = Number(value)
    return Number.isFinite(n) ? n : value
  }
  if (typeof value === "bigint") return Number(value)
  if (Buffer.isBuffer(value)) return null // no bytea in the app's published columns
  return value
}

/** A whole row in the normal form. Capture's reader (src/pipeline/capture/pgoutput.ts) gives each
 *  value its normal form as it reads it; this is the same, a row at a time. */
export const normalizeRow = (
  raw: Readonly<Record<string, unknown>>,
  types: ReadonlyMap<string, number>
): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  for (const k in raw) {
    const v = raw[k]
    // undefined is pgoutput's "unchanged TOAST value": it must stay undefined (not null),
    // so the store keeps the mirrored value instead of blanking it.
    out[k] = v === undefined ? undefined : normalizeValue(v, types.get(k))
  }
  return out
}
