// The activity log (spec 1.7): who did what to which key, endpoint or subscription, and when.
import type postgres from "postgres"
import type { Actor } from "./identity.ts"

export interface ActivityEntry {
  readonly companyId: string
  readonly actor: Actor | null
  /** e.g. key.created, key.revoked, admin_token.created */
  readonly kind: string
  readonly subjectId: string | null
  readonly details: Record<string, unknown>
}

export const logActivity = async (sql: postgres.Sql | postgres.TransactionSql, entry: ActivityEntry): Promise<void> => {
  await sql`
    insert into service.activity (company_id, actor_id, actor_email, kind, subject_id, details)
    values (${entry.companyId}, ${entry.actor?.userId ?? null}, ${entry.actor?.email ?? null}, ${entry.kind},
            ${entry.subjectId}, ${sql.json(entry.details as postgres.JSONValue)})`
}
