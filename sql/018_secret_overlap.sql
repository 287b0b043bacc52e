-- migrate: allows constraint-missing-not-valid (blocks writes of service.webhook_endpoints for under 10 ms per thousand endpoints while the check reads them): a company has a few endpoints
-- Issue 15.5, rotation with overlap: a rotated endpoint secret keeps signing beside the new
-- one until previous_secret_expires_at, so the receiver switches secrets when it likes. The
-- previous secret is the blob the rotation replaced (encrypted like the current one, context
-- 'endpoint:<id>'); a rotation with no overlap clears it, and one during an overlap replaces it
-- with the secret it rotates away (the newest previous wins, as at Stripe). It signs only while
-- previous_secret_expires_at is later than the database's now(), which also set it.
-- Keys' subscription secrets (webhook_key_secrets) cannot be rotated through the API, so they
-- have no previous secret.
alter table service.webhook_endpoints
  add column previous_secret bytea,
  add column previous_secret_expires_at timestamptz,
  add constraint webhook_endpoints_previous_secret_expiry
    check ((previous_secret is null) = (previous_secret_expires_at is null));

-- The delivery engine hands back what it holds when how a delivery is signed changes
-- (sql/010): the previous secret and its end count too (e.g. an overlap cut short).
drop trigger webhook_endpoints_changed on service.webhook_endpoints;
create trigger webhook_endpoints_changed after update on service.webhook_endpoints for each row
  when ((old.url, old.secret, old.previous_secret, old.previous_secret_expires_at, old.events, old.enabled)
    is distinct from (new.url, new.secret, new.previous_secret, new.previous_secret_expires_at, new.events, new.enabled))
  execute function service.notify_webhook_destinations();
