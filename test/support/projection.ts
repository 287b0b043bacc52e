// Compares the views capture maintained with a fresh projection of the app tables as they
// are now (a bootstrap under a throwaway slot). Capture must be stopped first. `app`: the
// app's database when it is not `db` (two databases).
import { bootstrap } from "../../src/pipeline/capture/bootstrap.ts"
import type { TestDatabase } from "./db.ts"
import { runSql } from "./sql.ts"

export const diffAgainstFreshProjection = async (
  db: Pick<TestDatabase, "sql" | "url" | "name">,
  app?: Pick<TestDatabase, "sql" | "url">
) => {
  await db.sql`drop table if exists public.maintained_views`
  await db.sql`create table public.maintained_views as select resource, id, body from service.views`
  const slot = `check_${db.name}`
  await runSql(db.sql, bootstrap(app?.url ?? db.url, slot, null), app?.sql)
  await (app ?? db).sql`select pg_drop_replication_slot(${slot})`
  const diff = await db.sql<{ resource: string; id: string; maintained: string | null; fresh: string | null }[]>`
    select coalesce(m.resource, v.resource) as resource, coalesce(m.id, v.id)::text as id, m.body as maintained, v.body as fresh
    from public.maintained_views m full join service.views v on v.resource = m.resource and v.id = m.id
    where m.body is distinct from v.body limit 20`
  const [row] = await db.sql<{ n: number }[]>`select count(*)::int as n from service.views`
  return { diff, views: row!.n }
}
