// Functions of the service's schema made from what the code declares, so a list lives in one
// place: a resource's number (the views' page indexes key it by service.resource_no) and the
// app table whose rows a resource's views may stand for (service.view_backed_table), both from
// src/domain/resources.ts. Migrations made them first (sql/032, sql/034); each start makes them
// again from the list when it grew. Never the other way: a process of an older release, whose
// list is shorter, leaves a longer one as it is (numbers only ever grow).
import { CHILD_RECORDS, RESOURCE_INFO, RESOURCE_NUMBER, RESOURCES } from "../../domain/resources.ts"
import type { Tx } from "./Database.ts"

const literal = (s: string) => {
  if (!/^[a-z_-]+$/.test(s)) throw new Error(`not a plain name: ${s}`)
  return `'${s}'`
}

/** The functions' text, from the declarations. */
export const declaredFunctions = (): string => {
  const numbers = RESOURCES.map((r) => `when ${literal(r)} then ${RESOURCE_NUMBER[r]}`).join(" ")
  const tables = RESOURCES.filter((r) => !CHILD_RECORDS.has(r))
    .map((r) => `when ${literal(r)} then ${literal(RESOURCE_INFO[r].table)}`)
    .join(" ")
  return `
    create or replace function service.resource_no(resource text) returns smallint language sql immutable parallel safe as $$
      select (case resource ${numbers} end)::smallint
    $$;
    comment on function service.resource_no(text) is 'resources: ${RESOURCES.length}';
    create or replace function service.view_backed_table(resource text) returns text language sql immutable as $$
      select case resource ${tables} end
    $$;
    comment on function service.view_backed_table(text) is 'resources: ${RESOURCES.length}';`
}

/** Makes the functions again when this build declares more resources than the ones there say. */
export const syncDeclared = async (tx: Tx): Promise<boolean> => {
  const [f] = await tx<{ exists: boolean; comment: string | null }[]>`
    select to_regprocedure('service.resource_no(text)') is not null as exists,
           obj_description(to_regprocedure('service.resource_no(text)'), 'pg_proc') as comment`
  // Before the migration that made them: nothing to keep in step yet.
  if (!f?.exists) return false
  const there = Number(/^resources: (\d+)$/.exec(f.comment ?? "")?.[1] ?? 0)
  if (there >= RESOURCES.length) return false
  await tx.unsafe(declaredFunctions())
  return true
}
