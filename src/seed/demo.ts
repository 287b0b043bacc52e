// Placeholder until the demo seeder lands.
import type { Sql } from "postgres"

export interface SeedSummary {
  readonly company: string
  readonly companyId: string
  readonly host: string
  readonly adminEmail: string
  readonly counts: Record<string, number>
}

export const seedDemo = async (sql: Sql): Promise<SeedSummary> => {
  const [c] = await sql<{ id: string }[]>`
    insert into app.companies (name, host, tier, api_enabled) values ('Acme Construction', 'acme.localhost', 'company', true) returning id`
  await sql`insert into app.users (company_id, name, email, role) values (${c!.id}, 'Ada Admin', 'admin@acme.example', 'admin')`
  return { company: "Acme Construction", companyId: c!.id, host: "acme.localhost", adminEmail: "admin@acme.example", counts: {} }
}
