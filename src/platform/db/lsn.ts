// PostgreSQL log sequence numbers ("16/B374D848") as bigints, for exact comparison.
export type Lsn = bigint

export const parseLsn = (text: string): Lsn => {
  const [hi, lo] = text.split("/")
  if (hi === undefined || lo === undefined || !/^[0-9A-Fa-f]{1,8}$/.test(hi) || !/^[0-9A-Fa-f]{1,8}$/.test(lo)) {
    throw new Error(`not an LSN: ${text}`)
  }
  return (BigInt(`0x${hi}`) << 32n) | BigInt(`0x${lo}`)
}

export const formatLsn = (lsn: Lsn): string =>
  `${(lsn >> 32n).toString(16).toUpperCase()}/${(lsn & 0xffffffffn).toString(16).toUpperCase()}`

export const ZERO_LSN: Lsn = 0n
