// The activity log (docs/api.md#the-admin-api): who did what to which key, token, endpoint or subscription, and
// when. Every writer goes through writeActivity, every reader through listActivity.
import { Effect } from "effect"
import { query, type Sql } from "../platform/db/Sql.ts"
import { requireCompanyId } from "../domain/ids.ts"
import type { Invalid } from "../domain/errors.ts"
import type { Tx } from "../platform/db/Database.ts"

/**
 * Every kind the activity log holds; the part before the dot is its family ("endpoint").
 * The filter takes a kind or a family; anything else could only match nothing, so it is
 * refused (400). Keep in step with the writers: access/keys/store.ts, access/tokens.ts, src/webhooks,
 * src/webhooks/replay/select.ts, jobs.ts, src/faces/cli/commands/capture.ts (quarantine),
 * src/webhooks/engine/record-queries.ts (endpoint.switched_off) and
 * sql/019's trigger (endpoint.failing).
 */
export const ACTIVITY_KINDS = [
  "key.created",
  "key.revoked",
  "admin_token.created",
  "admin_token.revoked",
  "endpoint.created",
  "endpoint.updated",
  "endpoint.secret_rotated",
  "endpoint.deleted",
  "endpoint.enabled",
  "endpoint.failing",
  "endpoint.switched_off",
  "endpoint.tested",
  "subscription.created",
  "subscription.disabled",
  "subscription.enabled",
  "subscription.deleted",
  "subscription.tested",
  "delivery.resent",
  "deliveries.replayed",
  "deliveries.replay_cancelled",
  "quarantine.retried",
  "quarantine.discarded",
  "portal_link.created",
  "portal_link.opened"
] as const

/** What the activity log can be filtered by: a kind, or its family (endpoint, subscription...). */
export const ACTIVITY_FILTERS = [...new Set(ACTIVITY_KINDS.flatMap((k) => [k.slice(0, k.indexOf(".")), k]))]

/** An admin user (CLI or admin HTTP API), an API key acting on its own subscriptions, or the service. */
export type Actor =
  | { readonly kind: "user"; readonly id: string | null; readonly email: string | null }
  | { readonly kind: "key"; readonly keyId: string }
  | { readonly kind: "system" }

export const SYSTEM: Actor = { kind: "system" }

/** An admin user acting (the CLI, the admin API, the pages). */
export const userActor = (user: { readonly userId: string; readonly email: string }): Actor => ({
  kind: "user",
  id: user.userId,
  email: user.email
})

export type NewActivity = {
  companyId: string
  actor: Actor
  kind: string
  subjectId: string | null
  details?: Record<string, unknown>
}

/** Writes one entry, in the caller's transaction when it runs in one (Sql's `transaction`). */
export const writeActivity = (entry: NewActivity): Effect.Effect<void, never, Sql> => query((sql) => insert(sql, entry))

/** An admin's change to a thing of their own company (an API key, an admin token), as writeActivity writes it. */
export const writeAdminActivity = (
  admin: { readonly userId: string; readonly email: string; readonly companyId: string },
  kind: (typeof ACTIVITY_KINDS)[number],
  subjectId: string,
  details: Record<string, unknown>
): Effect.Effect<void, never, Sql> =>
  writeActivity({ companyId: admin.companyId, actor: userActor(admin), kind, subjectId, details })

const insert = async (tx: Tx, entry: NewActivity): Promise<void> => {
  const a = entry.actor
  const details = {
    ...(entry.details ?? {}),
    ...(a.kind === "key" ? { byKey: a.keyId } : a.kind === "system" ? { by: "service" } : {})
  }
  await tx`
    insert into service.activity (company_id, actor_id, actor_email, kind, subject_id, details)
    values (${entry.companyId}, ${a.kind === "user" ? a.id : null}, ${a.kind === "user" ? a.email : null},
      ${entry.kind}, ${entry.subjectId}, ${JSON.stringify(details)}::text::jsonb)`
}

export type ActivityEntry = {
  readonly id: string
  readonly at: string
  readonly kind: string
  readonly subjectId: string | null
  readonly actorId: string | null
  readonly actorEmail: string | null
  /** The API key's name, when a key acted (its own subscriptions, its portal). */
  readonly keyName: string | null
  readonly details: Record<string, unknown>
}

/**
 * A company's activity, newest first; with `kind`, only entries of that kind ("key.created")
 * or family ("key"), however far back they are.
 */
export const listActivity = Effect.fn("listActivity")(function* (input: {
  companyId: string
  limit?: number
  kind?: string | undefined
}) {
  const companyId = yield* Effect.try({ try: () => requireCompanyId(input.companyId), catch: (e) => e as Invalid })
  const limit = Math.min(Math.max(Math.trunc(input.limit ?? 50), 1), 500)
  const kind = input.kind === undefined || input.kind === "" ? null : input.kind
  const rows = yield* query(
    (sql) => sql<
      {
        id: string
        at: Date
        kind: string
        subject_id: string | null
        actor_id: string | null
        actor_email: string | null
        key_name: string | null
        details: Record<string, unknown>
      }[]
    >`
    select a.id::text, a.at, a.kind, a.subject_id, a.actor_id::text, a.actor_email, k.name as key_name, a.details
    from service.activity a
    left join service.api_keys k on k.id = case when a.details->>'byKey' ~ '^[0-9a-f-]{36}$' then (a.details->>'byKey')::uuid end
    where a.company_id = ${companyId}
      and (${kind}::text is null or a.kind = ${kind}::text or starts_with(a.kind, ${kind}::text || '.'))
    order by a.at desc, a.id desc limit ${limit}`
  )
  return rows.map(
    (r): ActivityEntry => ({
      id: r.id,
      at: r.at.toISOString(),
      kind: r.kind,
      subjectId: r.subject_id,
      actorId: r.actor_id,
      actorEmail: r.actor_email,
      keyName: r.key_name,
      details: r.details
    })
  )
})
