// What travels to capture through the app's WAL (transactional logical messages, so capture
// meets them in stream order and applies them with its checkpoint): operators' retry and
// discard, rebuild-views' "shape these again", capture's own "continue", and the contract
// watch's findings (docs/design.md, "Quarantine").
import type { Sql } from "postgres"
import { APP_COLUMNS } from "../../../domain/records/columns.ts"

/** Prefix of the logical messages that carry operators' retry and discard requests. */
export const QUARANTINE_PREFIX = "safety-records-quarantine"
/** Prefix of the messages capture's contract watch writes: an app table's fit as the catalog shows it. */
export const CONTRACT_PREFIX = "safety-records-contract"

/** Capture's own request to go on with the retries it has queued (their next chunk is taken at it). */
export const askToContinue = (app: Sql) =>
  app`select pg_logical_emit_message(true, ${QUARANTINE_PREFIX}, '{"op":"continue"}')`.execute()

/** What a transaction asks of the quarantine at its start (in stream order). */
export type QuarantineMarker =
  /** The table's columns fit what the service reads (null), or these problems (a Relation message, the contract watch). */
  | { readonly kind: "contract"; readonly table: string; readonly problems: ReadonlyArray<string> | null }
  /** Shape these held records again now. */
  | { readonly kind: "retry"; readonly records: ReadonlyArray<readonly [string, string]> }
  /** Shape again every held record up to entry `upTo` whose table fits. */
  | { readonly kind: "retry-all"; readonly upTo: string }
  /** Drop these held records: their events are not sent; their view stays as it is. */
  | { readonly kind: "discard"; readonly records: ReadonlyArray<readonly [string, string]> }
  /** Shape these records now, held or not, holding those that fail (rebuild-views' findings). */
  | { readonly kind: "check"; readonly records: ReadonlyArray<readonly [string, string]> }
  /** Nothing: a transaction that lets capture go on with retries it has queued. */
  | { readonly kind: "continue" }
  /** Rows re-read from the app (resync.ts): the changes they make are in the transaction; `done` ends a table's resync. */
  | { readonly kind: "resynced"; readonly table: string; readonly after: string | null; readonly rows: number }
  /** Rows asked for by key (a retry's, a privacy case's end) re-read from the app: their changes are in the transaction, the asks are met. */
  | { readonly kind: "reread"; readonly table: string; readonly keys: ReadonlyArray<string> }

/** A request message's content, as the CLI (and rebuild-views, capture itself) write it. */
export interface QuarantineRequest {
  readonly op: "retry" | "discard" | "check" | "continue"
  readonly records?: ReadonlyArray<readonly [string, string]>
  readonly all?: boolean
  /** With all: the newest entry id the request covers. */
  readonly upTo?: string
}

/** The marker a request message makes; null for a message that is not one (it is ignored). */
export const markerOf = (content: string): QuarantineMarker | null => {
  try {
    const r = JSON.parse(content) as QuarantineRequest
    const records = Array.isArray(r.records)
      ? r.records.filter(
          (x): x is readonly [string, string] =>
            Array.isArray(x) && typeof x[0] === "string" && typeof x[1] === "string"
        )
      : []
    if (r.op === "retry")
      return r.all === true
        ? { kind: "retry-all", upTo: typeof r.upTo === "string" && /^\d{1,18}$/.test(r.upTo) ? r.upTo : "0" }
        : { kind: "retry", records }
    if (r.op === "discard") return { kind: "discard", records }
    if (r.op === "check") return { kind: "check", records }
    if (r.op === "continue") return { kind: "continue" }
    return null
  } catch {
    return null
  }
}

/** The marker a contract watch message makes (null: not one). */
export const contractMarkerOf = (content: string): QuarantineMarker | null => {
  try {
    const r = JSON.parse(content) as { table?: unknown; problems?: unknown }
    if (typeof r.table !== "string" || !(r.table in APP_COLUMNS)) return null
    const problems = Array.isArray(r.problems) ? r.problems.filter((p): p is string => typeof p === "string") : null
    return { kind: "contract", table: r.table, problems: problems === null || problems.length === 0 ? null : problems }
  } catch {
    return null
  }
}
