import { randomBytes } from "node:crypto"
// Playing the app with plain SQL: a company with its modules, and small record helpers.
import type { Sql } from "postgres"
import { RESOURCES } from "../../src/domain/resources.ts"

export const makeCompany = async (
  sql: Sql,
  options: { host?: string; tier?: string; modules?: ReadonlyArray<string> } = {}
) => {
  const host = options.host ?? `c${Math.random().toString(36).slice(2, 10)}.test`
  const [c] = await sql<{ id: string }[]>`
    insert into app.companies (name, host, tier, api_enabled) values (${`Company ${host}`}, ${host}, ${options.tier ?? "company"}, true)
    returning id::text`
  const modules = options.modules ?? RESOURCES
  for (const m of modules)
    await sql`insert into app.company_modules (company_id, module, enabled) values (${c!.id}, ${m}, true)`
  return { id: c!.id, host }
}

export const insertIncident = async (sql: Sql, companyId: string, fields: Record<string, unknown> = {}) => {
  const [r] = await sql<{ id: string }[]>`
    insert into app.incidents ${sql({
      company_id: companyId,
      reference: `INC-${Math.floor(Math.random() * 1e6)}`,
      type: "injury",
      title: "Slipped on wet floor",
      description: "Worker slipped near the loading bay",
      occurred_at: new Date("2026-03-04T05:06:07.089Z"),
      severity: "minor",
      ...fields
    })} returning id::text`
  return r!.id
}

export const insertAction = async (sql: Sql, companyId: string, fields: Record<string, unknown> = {}) => {
  const [r] = await sql<{ id: string }[]>`
    insert into app.corrective_actions ${sql({
      company_id: companyId,
      title: "Fix the railing",
      source: "manual",
      status: "open",
      priority: "high",
      owner: "Sam",
      ...fields
    })} returning id::text`
  return r!.id
}

/**
 * Text that does not compress: PostgreSQL stores it out of line (TOAST) and sends it as
 * "unchanged" in an update that leaves it.
 */
export const outOfLineText = (): string => randomBytes(6000).toString("base64")
