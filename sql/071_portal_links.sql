-- Portal links (docs/operations.md#portal-links): an admin gives an integrator a page of one API
-- key's subscriptions and deliveries for a while. The link's token is kept only as its SHA-256
-- hash, works once, and is then a session, whose id is kept as a hash too; both end when the
-- link expires or the key is revoked or expires (checked at every request: the key's row says so).
create table service.portal_links (
  id uuid primary key default gen_random_uuid(),
  key_id uuid not null references service.api_keys (id) on delete cascade,
  company_id uuid not null,
  token_hash bytea not null unique,    -- sha256 of the link's token
  created_at timestamptz not null default now(),
  created_by text,                     -- the admin's e-mail
  expires_at timestamptz not null,
  opened_at timestamptz,               -- set once: the token works once
  session_hash bytea unique,           -- sha256 of the session cookie opened with it
  csrf text,                           -- the session's forms' token
  brand_name text,                     -- shown instead of the company's name
  brand_colour text check (brand_colour ~ '^#[0-9a-f]{6}$')
);
create index portal_links_key on service.portal_links (key_id);
