-- migrate: accepts 5848d4238dcd33963e91d69c32c2f23207be1973199799dfca5470e0f0e1add8
-- Issue 13.7: one secrets key per database. Webhook signing secrets are encrypted under the
-- service's key (SECRETS_KEY, else DATA_DIR/secrets.key); a process with another key could
-- sign nothing it claims. So the database records which key its secrets are under, as a
-- fingerprint (src/platform/secrets/secrets-key.ts keyFingerprint: HMAC-SHA256 under the key of a fixed
-- label), never the key, and a process whose key differs refuses to start
-- (src/platform/secrets/key-check.ts).
create table service.secrets_key (
  id boolean primary key default true check (id), -- one row
  fingerprint text not null check (fingerprint ~ '^[0-9a-f]{64}$'),
  -- Where the recording process got its key: 'SECRETS_KEY' (the environment) or 'file'
  -- (DATA_DIR/secrets.key), so a refusal can say where to look for the right one.
  source text not null check (source in ('SECRETS_KEY', 'file')),
  recorded_at timestamptz not null default now()
);
