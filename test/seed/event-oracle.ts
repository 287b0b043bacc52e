// An independent oracle of the event rules of docs/events.md#event-kinds for tests: triggers log every row
// change of the evented tables with its transaction id, and SQL derives the events from
// each row's net change per transaction (state before the first change, state at the last).
import type postgres from "postgres"
import { EVENT_KINDS, type EventKind } from "../../src/domain/event-kinds.ts"

const TABLES = [
  "incidents",
  "observations",
  "corrective_actions",
  "audits",
  "inspections",
  "training_records",
  "changes",
  "permits"
]

export const installEventOracle = async (sql: postgres.Sql) => {
  await sql.unsafe(`
    create schema oracle;
    create table oracle.log (seq bigserial primary key, xid bigint not null, tbl text not null, id uuid not null, old jsonb, new jsonb);
    create function oracle.record() returns trigger language plpgsql as $$
    begin
      insert into oracle.log (xid, tbl, id, old, new) values (
        txid_current(), tg_table_name, coalesce(new.id, old.id),
        case when tg_op = 'INSERT' then null else to_jsonb(old) end,
        case when tg_op = 'DELETE' then null else to_jsonb(new) end);
      return null;
    end $$;
    ${TABLES.map((t) => `create trigger oracle_${t} after insert or update or delete on app.${t} for each row execute function oracle.record();`).join("\n")}
  `)
}

/** Events that committed transactions since installation must have fired, per kind. */
export const oracleEvents = async (sql: postgres.Sql): Promise<Record<EventKind, number>> => {
  const [row] = await sql<Record<EventKind, number>[]>`
    with firsts as (select distinct on (xid, tbl, id) xid, tbl, id, old from oracle.log order by xid, tbl, id, seq),
         lasts as (select distinct on (xid, tbl, id) xid, tbl, id, new from oracle.log order by xid, tbl, id, seq desc),
         net as (select f.tbl, f.old, l.new from firsts f join lasts l using (xid, tbl, id) where l.new is not null),
         became as (
           select tbl, old is null as inserted,
                  new->>'status' as status, old->>'status' as was,
                  new->>'outcome' as outcome, old->>'outcome' as had
           from net)
    select
      count(*) filter (where tbl = 'incidents' and inserted)::int as "incident.created",
      count(*) filter (where tbl = 'observations' and inserted)::int as "observation.created",
      count(*) filter (where tbl = 'corrective_actions' and inserted)::int as "corrective_action.created",
      count(*) filter (where tbl = 'corrective_actions' and status in ('completed', 'verified')
                         and (inserted or was not in ('completed', 'verified')))::int as "corrective_action.closed",
      count(*) filter (where tbl = 'audits' and inserted)::int as "audit.created",
      count(*) filter (where tbl = 'inspections' and outcome = 'fail' and (inserted or had <> 'fail'))::int as "inspection.failed",
      count(*) filter (where tbl = 'training_records' and inserted)::int as "training_record.created",
      count(*) filter (where tbl = 'changes' and status = 'approved' and (inserted or was <> 'approved'))::int as "change.approved",
      count(*) filter (where tbl = 'changes' and status = 'implemented' and (inserted or was <> 'implemented'))::int as "change.implemented",
      count(*) filter (where tbl = 'permits' and status = 'approved' and (inserted or was <> 'approved'))::int as "permit.approved",
      count(*) filter (where tbl = 'permits' and status = 'closed' and (inserted or was <> 'closed'))::int as "permit.closed"
    from became`
  return Object.fromEntries(EVENT_KINDS.map((k) => [k, row![k]])) as Record<EventKind, number>
}
