// Keyset cursors: opaque to clients, tamper-evident, and bound to the list they came from.
// A cursor carries the position of the last record of a page (its createdAt with
// microseconds, or its change time in a list by change, and its id) and an HMAC over that position and the list's identity
// (company, resource and filters). A changed byte, or the same cursor on another list,
// fails the check. Pure but for loading the key (one secret in service.settings, shared by
// every process).
import { createHmac, createSecretKey, randomBytes, timingSafeEqual, type KeyObject } from "node:crypto"
import type postgres from "postgres"
import { isUuid } from "../domain/ids.ts"

export interface CursorPosition {
  /** created_at (changed_at in a list sorted by updatedAt) exactly as PostgreSQL writes it as text (microseconds and offset included). */
  readonly createdAt: string
  readonly id: string
}

/** What a cursor is bound to: the same values give the same binding. */
export interface CursorBinding {
  readonly companyId: string
  readonly resource: string
  readonly filters: Readonly<Record<string, string | undefined>>
}

export type CursorError = "malformed" | "tampered" | "other-list"

const VERSION = "1"
const MAC_BYTES = 16
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}(:\d{2}){0,2})$/

/** The signing key (a KeyObject: HMAC with a raw buffer key is several times slower). */
export type CursorKey = KeyObject
// Ids in a cursor are written lower-case by this API; any other form was not issued here.
const isLowerUuid = (id: string) => isUuid(id) && id === id.toLowerCase()

export const cursorKey = (secret: Uint8Array): CursorKey => createSecretKey(secret)

/** A random 32-byte secret kept in service.settings, created on first use by whichever process comes first. */
export const settingSecret = async (sql: postgres.Sql, name: string): Promise<Buffer> => {
  await sql`
    insert into service.settings (name, value) values (${name}, ${randomBytes(32).toString("base64")})
    on conflict (name) do nothing`
  const [row] = await sql<{ value: string }[]>`select value from service.settings where name = ${name}`
  return Buffer.from(row!.value, "base64")
}

/** The key that signs every list's cursors. */
export const loadCursorKey = async (sql: postgres.Sql): Promise<CursorKey> =>
  cursorKey(await settingSecret(sql, "cursor_hmac_key"))

const digests = new WeakMap<CursorKey, Map<string, string>>()

/** A short, stable digest of the binding, stored in the cursor to tell "other list" from "tampered". */
const bindingDigest = (key: CursorKey, binding: CursorBinding): string => {
  const filters = Object.keys(binding.filters)
    .sort()
    .filter((k) => binding.filters[k] !== undefined)
    .map((k) => [k, binding.filters[k]])
  const text = JSON.stringify(["binding", binding.companyId, binding.resource, filters])
  let cache = digests.get(key)
  if (cache === undefined) digests.set(key, (cache = new Map()))
  let digest = cache.get(text)
  if (digest === undefined) {
    digest = createHmac("sha256", key).update(text).digest("base64url").slice(0, 8)
    if (cache.size >= 10_000) cache.clear()
    cache.set(text, digest)
  }
  return digest
}

const mac = (key: CursorKey, payload: string): Buffer =>
  createHmac("sha256", key).update(payload).digest().subarray(0, MAC_BYTES)

export const encodeCursor = (key: CursorKey, binding: CursorBinding, position: CursorPosition): string => {
  const payload = `${VERSION}|${bindingDigest(key, binding)}|${position.createdAt}|${position.id}`
  return `${Buffer.from(payload).toString("base64url")}.${mac(key, payload).toString("base64url")}`
}

export const decodeCursor = (
  key: CursorKey,
  binding: CursorBinding,
  cursor: string
): { readonly position: CursorPosition } | { readonly error: CursorError } => {
  const dot = cursor.indexOf(".")
  if (dot <= 0 || cursor.length > 512 || !/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(cursor)) return { error: "malformed" }
  const payload = Buffer.from(cursor.slice(0, dot), "base64url").toString("utf8")
  const given = Buffer.from(cursor.slice(dot + 1), "base64url")
  const expected = mac(key, payload)
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { error: "tampered" }
  const [version, digest, createdAt, id, ...rest] = payload.split("|")
  if (version !== VERSION || rest.length > 0 || createdAt === undefined || id === undefined)
    return { error: "malformed" }
  if (!TIMESTAMP.test(createdAt) || !isLowerUuid(id)) return { error: "malformed" }
  if (digest !== bindingDigest(key, binding)) return { error: "other-list" }
  return { position: { createdAt, id } }
}

/** Where a page starts: at the beginning without a cursor, else where its cursor says, or why that cursor is refused. */
export const pagePosition = (
  key: CursorKey,
  binding: CursorBinding,
  cursor: string | undefined
): { readonly position: CursorPosition | undefined } | { readonly error: CursorError } =>
  cursor === undefined ? { position: undefined } : decodeCursor(key, binding, cursor)

export const CURSOR_ERROR_MESSAGES: Readonly<Record<CursorError, string>> = {
  malformed: "cursor is not a cursor this API issued; pass the nextCursor of the previous page unchanged",
  tampered:
    "cursor is invalid (it was changed or issued by another server); pass the nextCursor of the previous page unchanged",
  "other-list":
    "cursor belongs to another list: use it with the same resource, filters and sort (createdAfter, createdBefore, updatedAfter, updatedBefore, name, status, sort) as the page it came from"
}

/**
 * A page's JSON, written straight from the rows (they hold up to limit + 1, the extra one saying
 * there is a next page): {"data":[...],"nextCursor":...}. `item` writes one row's JSON.
 */
export const pageJson = <Row extends { readonly id: string | null; readonly ts: string | null }>(
  rows: ReadonlyArray<Row>,
  count: number,
  limit: number,
  item: (row: Row) => string,
  next: (position: CursorPosition) => string
): string => {
  const more = count > limit
  const n = more ? limit : count
  let body = '{"data":['
  for (let i = 0; i < n; i++) body += (i > 0 ? "," : "") + item(rows[i]!)
  if (!more) return `${body}],"nextCursor":null}`
  const last = rows[n - 1]!
  return `${body}],"nextCursor":${JSON.stringify(next({ createdAt: last.ts!, id: last.id! }))}}`
}
