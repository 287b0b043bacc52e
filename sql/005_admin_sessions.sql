-- Sessions of the admin pages (/admin). An admin signs in with an admin token (the CLI's
-- `tokens create`); the browser then holds only a random session id in a cookie, never the
-- token. Only the SHA-256 of the session id is kept, so reading this table does not let
-- anyone act as a signed-in admin. Each session belongs to the token it was opened with:
-- revoking (or deleting) the token ends its sessions, and every request re-checks the
-- token and that its user is still an admin.
create table service.admin_sessions (
  id_hash bytea primary key,               -- sha256(session id)
  token_id uuid not null references service.admin_tokens (id) on delete cascade,
  company_id uuid not null,
  user_id uuid not null,
  csrf_secret bytea not null,              -- the synchronizer token every form carries
  flash jsonb,                             -- the message shown on the next page, then cleared
  created_at timestamptz not null default now(),
  last_seen_at timestamptz not null default now(),
  expires_at timestamptz not null,         -- idle expiry, moved forward on each request
  absolute_expires_at timestamptz not null -- never moved
);
create index admin_sessions_token on service.admin_sessions (token_id);
create index admin_sessions_expires on service.admin_sessions (expires_at);

create function service.admin_token_revoked_sessions() returns trigger
language plpgsql as $$
begin
  delete from service.admin_sessions where token_id = new.id;
  return null;
end $$;

create trigger admin_tokens_revoked_sessions
  after update of revoked_at on service.admin_tokens
  for each row when (old.revoked_at is null and new.revoked_at is not null)
  execute function service.admin_token_revoked_sessions();
