// What the webhook operations need, who performs them, and the activity log they write.
import type { ISql, Sql } from "postgres"
import type { AllowedNetworks, Lookup } from "../delivery/address-guard.ts"
import { DELIVERIES_CHANNEL } from "../platform/db/channels.ts"
import type { SendOptions } from "../delivery/sender.ts"
import { invalid, notFound } from "../domain/errors.ts"

export interface WebhookDeps {
  readonly sql: Sql
  /** 32 bytes (loadSecretsKey). */
  readonly secretsKey: Uint8Array
  /** WEBHOOK_ALLOWED_NETWORKS, parsed; empty allows public unicast only. */
  readonly allowed: AllowedNetworks
  /** Tests: a DNS table. */
  readonly lookup?: Lookup
  /** Tests: a CA made at run time (production uses NODE_EXTRA_CA_CERTS). */
  readonly ca?: SendOptions["ca"]
  /** Time limit of a test ping (default 10 s, as deliveries). */
  readonly pingTimeoutMs?: number
}

/** An admin user (CLI or admin HTTP API), an API key acting on its own subscriptions, or the service. */
export type Actor =
  | { readonly kind: "user"; readonly id: string | null; readonly email: string | null }
  | { readonly kind: "key"; readonly keyId: string }
  | { readonly kind: "system" }

export const SYSTEM: Actor = { kind: "system" }

/** A pool or a transaction. */
export type Tx = ISql<{}>

export const writeActivity = async (
  tx: Tx,
  entry: { companyId: string; actor: Actor; kind: string; subjectId: string; details?: Record<string, unknown> }
): Promise<void> => {
  const a = entry.actor
  const details = { ...(entry.details ?? {}), ...(a.kind === "key" ? { byKey: a.keyId } : a.kind === "system" ? { by: "service" } : {}) }
  await tx`
    insert into service.activity (company_id, actor_id, actor_email, kind, subject_id, details)
    values (${entry.companyId}, ${a.kind === "user" ? a.id : null}, ${a.kind === "user" ? a.email : null},
      ${entry.kind}, ${entry.subjectId}, ${JSON.stringify(details)}::text::jsonb)`
}

/** Wakes delivery engines (they also poll, so a lost notification only delays). */
export const wakeDelivery = async (tx: Tx): Promise<void> => {
  await tx`select pg_notify(${DELIVERIES_CHANNEL}, '')`
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export const isUuid = (s: unknown): s is string => typeof s === "string" && UUID.test(s)

/** An id that can only be missing when malformed: 404, not a database cast error. */
export const requireId = (id: unknown, what: string): string => {
  if (!isUuid(id)) throw notFound(`no ${what} ${typeof id === "string" ? JSON.stringify(id.slice(0, 60)) : ""}`.trim())
  return id.toLowerCase()
}

export const requireCompanyId = (id: unknown): string => {
  if (!isUuid(id)) throw invalid("company must be a company id (a UUID)", { field: "company" })
  return id.toLowerCase()
}

export const iso = (d: Date | null | undefined): string | null => (d ? d.toISOString() : null)

export type ActivityEntry = {
  readonly id: string
  readonly at: string
  readonly kind: string
  readonly subjectId: string | null
  readonly actorId: string | null
  readonly actorEmail: string | null
  readonly details: Record<string, unknown>
}

/** A company's activity log, newest first (webhook entries and the others alike). */
/**
 * A company's activity, newest first; with `kind`, only entries of that kind ("key.created")
 * or family ("key"), however far back they are.
 */
export const listActivity = async (
  deps: Pick<WebhookDeps, "sql">,
  input: { companyId: string; limit?: number; kind?: string | undefined }
): Promise<ReadonlyArray<ActivityEntry>> => {
  const companyId = requireCompanyId(input.companyId)
  const limit = Math.min(Math.max(Math.trunc(input.limit ?? 50), 1), 500)
  const kind = input.kind === undefined || input.kind === "" ? null : input.kind
  const rows = await deps.sql<{ id: string; at: Date; kind: string; subject_id: string | null; actor_id: string | null; actor_email: string | null; details: Record<string, unknown> }[]>`
    select id::text, at, kind, subject_id, actor_id::text, actor_email, details
    from service.activity
    where company_id = ${companyId}
      and (${kind}::text is null or kind = ${kind}::text or starts_with(kind, ${kind}::text || '.'))
    order by at desc, id desc limit ${limit}`
  return rows.map((r) => ({
    id: r.id,
    at: r.at.toISOString(),
    kind: r.kind,
    subjectId: r.subject_id,
    actorId: r.actor_id,
    actorEmail: r.actor_email,
    details: r.details
  }))
}
