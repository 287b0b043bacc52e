-- The delivery engine holds claimed deliveries in memory, with their address and signing
-- secret, until a send slot frees (seconds behind a slow receiver). Whatever changes where a
-- delivery may go or how it is signed tells the engine at commit, and it hands back what it
-- has not started yet, to be claimed again as the destination now stands: a rotated secret
-- signs the next request, a deleted endpoint or revoked key gets nothing more.
-- Row triggers with WHEN conditions: updates that change none of these (failure counts,
-- last use of a key) cost nothing.
create function service.notify_webhook_destinations() returns trigger
language plpgsql as $$
begin
  perform pg_notify('service_webhook_destinations', '');
  return null;
end
$$;

create trigger webhook_endpoints_changed after update on service.webhook_endpoints for each row
  when ((old.url, old.secret, old.events, old.enabled) is distinct from (new.url, new.secret, new.events, new.enabled))
  execute function service.notify_webhook_destinations();
create trigger webhook_endpoints_deleted after delete on service.webhook_endpoints for each statement
  execute function service.notify_webhook_destinations();

create trigger webhook_subscriptions_changed after update on service.webhook_subscriptions for each row
  when ((old.url, old.event, old.active) is distinct from (new.url, new.event, new.active))
  execute function service.notify_webhook_destinations();
create trigger webhook_subscriptions_deleted after delete on service.webhook_subscriptions for each statement
  execute function service.notify_webhook_destinations();

create trigger webhook_key_secrets_changed after update or delete on service.webhook_key_secrets for each statement
  execute function service.notify_webhook_destinations();

create trigger api_keys_changed after update on service.api_keys for each row
  when ((old.revoked_at, old.expires_at, old.scopes, old.webhooks) is distinct from (new.revoked_at, new.expires_at, new.scopes, new.webhooks))
  execute function service.notify_webhook_destinations();

create trigger companies_changed after update on service.companies for each row
  when ((old.tier, old.api_enabled, old.modules) is distinct from (new.tier, new.api_enabled, new.modules))
  execute function service.notify_webhook_destinations();
create trigger companies_deleted after delete on service.companies for each statement
  execute function service.notify_webhook_destinations();
