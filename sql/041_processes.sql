-- Each running process of the service, as it says itself (src/platform/processes.ts): its
-- release and the schema generation it was built for, its roles, and whether the schema fence
-- lets it write (docs/deployment.md#upgrades). Written at start and every 15 seconds, removed
-- at a clean stop; `status` lists those seen within the last minute, so an operator sees which
-- releases run side by side and which processes the fence stopped.
create table service.processes (
  id uuid primary key,
  release text not null,
  generation integer not null,
  roles text[] not null,
  host text not null,
  pid integer not null,
  started_at timestamptz not null default now(),
  seen_at timestamptz not null default now(),
  writable boolean not null,
  fence_reason text
);
