-- migrate: steps
-- migrate: equivalent-to 8d0a7313ad80df036da676926b0a6a7d1ca315c0b0d25bc36112db80ee03a3d2
-- migrate: allows ban-drop-column (blocks reads and writes of service.rows for under 50 ms, the swap's catalog changes): the jsonb column goes as the text one takes its name, as the released text changed its type
-- migrate: allows renaming-column (blocks reads and writes of service.rows for under 50 ms, in the same swap): the text column takes the name data
-- migrate: allows adding-not-nullable-field (blocks reads and writes of service.rows for under 50 ms, in the same swap): no scan, the validated rows_data_text_not_null proves it
-- The mirror's row data as text: capture only ever writes and reads it whole, and JSON text
-- costs PostgreSQL about a third less to write than jsonb (bench/capture).
--
-- Online since release 0.2.0 (docs/design.md, "Online migrations"): ALTER COLUMN ... TYPE
-- rewrote the whole mirror under a lock that stopped its reads and writes. Instead, a text
-- column beside the jsonb one, kept in step by a trigger while batches copy the rows, proved
-- never null by a constraint validated without blocking, then swapped in in one short
-- transaction (no scan: SET NOT NULL relies on the validated constraint).
alter table service.rows add column if not exists data_text text;

create or replace function service.rows_data_text() returns trigger language plpgsql as $$
begin
  new.data_text := new.data::text;
  return new;
end $$;

create or replace trigger rows_data_text before insert or update of data on service.rows
  for each row execute function service.rows_data_text();

-- The rows there were before the trigger, 2,000 a batch in key order, each batch committed. A
-- batch that waits for a row capture holds gives way (lock_timeout, set by the runner) and is
-- tried again, so capture never waits for more than a batch. A batch's keys are read first and
-- its rows updated by those keys: a range of (tbl, key) is estimated by tbl alone, and planned
-- as a read of the whole table.
do $$
declare
  tbls text[];
  keys text[];
  last_tbl text := '';
  last_key text := '';
  tries int := 0;
begin
  loop
    execute 'select array_agg(b.tbl order by b.tbl, b.key), array_agg(b.key order by b.tbl, b.key)
               from (select r.tbl, r.key from service.rows r where (r.tbl, r.key) > ($1, $2)
                      order by r.tbl, r.key limit 2000) b'
      into tbls, keys using last_tbl, last_key;
    exit when tbls is null;
    begin
      execute 'update service.rows r set data_text = r.data::text
                 from unnest($1::text[], $2::text[]) as k(tbl, key)
                where r.tbl = k.tbl and r.key = k.key'
        using tbls, keys;
    exception when lock_not_available or deadlock_detected then
      tries := tries + 1;
      if tries > 600 then raise; end if;
      perform pg_sleep(0.05);
      continue;
    end;
    tries := 0;
    last_tbl := tbls[array_length(tbls, 1)];
    last_key := keys[array_length(keys, 1)];
    commit;
  end loop;
end $$;

alter table service.rows add constraint rows_data_text_not_null check (data_text is not null) not valid;

alter table service.rows validate constraint rows_data_text_not_null;

drop trigger rows_data_text on service.rows;
drop function service.rows_data_text();
alter table service.rows drop column data;
alter table service.rows rename column data_text to data;
alter table service.rows alter column data set not null;
alter table service.rows drop constraint rows_data_text_not_null;
