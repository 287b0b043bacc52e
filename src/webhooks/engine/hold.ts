// Why a delivery may not go now: the rule the claim applies to due rows (held instead of
// sent), the release of held rows, and Send Again's 409 all read from here.
import type { Tx } from "../../platform/db/Database.ts"
import { ALERT_RESOURCE } from "../../domain/event-kinds.ts"

/** A record event (alerts are about destinations: no module or read right applies to them). */
const RECORD_EVENT = `ev.resource <> '${ALERT_RESOURCE}'`

// Aliases: d delivery, ev event, co company, w endpoint, s subscription, k key, ks key secret.
export const DELIVERY_JOINS = `join service.events ev on ev.id = d.event_id
  left join service.companies co on co.id = d.company_id
  left join service.webhook_endpoints w on w.id = d.endpoint_id
  left join service.webhook_subscriptions s on s.id = d.subscription_id
  left join service.api_keys k on k.id = s.key_id
  left join service.webhook_key_secrets ks on ks.key_id = s.key_id`
export const DELIVERY_FROM = `service.webhook_deliveries d ${DELIVERY_JOINS}`

/**
 * Why a delivery may not go now (null: it may). Send Again (manual) overrides only an
 * endpoint's switch-off (an admin may try a receiver that is back); what stops a destination
 * from receiving (modules, keys, subscriptions, the company's API and tier) holds for it too.
 */
export const HOLD_REASON = `case
  when co.id is null or co.tier <> 'company' then 'the company is not on the Company tier'
  when coalesce(w.secret, ks.secret) is null then 'there is no signing secret'
  when d.endpoint_id is not null then case
    when not w.enabled and not d.manual then 'the endpoint is switched off'
    when not (ev.event = any(w.events)) then 'the endpoint no longer takes ' || ev.event
    when ${RECORD_EVENT} and not (ev.resource = any(co.modules)) then 'the ' || ev.resource || ' module is turned off' end
  else case
    when not s.active then 'the subscription is turned off'
    when not co.api_enabled then 'the API is turned off for the company'
    when k.id is null or k.revoked_at is not null then 'the key is revoked'
    when k.expires_at <= now() then 'the key has expired'
    when not k.webhooks then 'the key no longer has the webhooks permission'
    when ${RECORD_EVENT} and not (ev.resource = any(k.scopes)) then 'the key can no longer read ' || ev.resource
    when ${RECORD_EVENT} and not (ev.resource = any(co.modules)) then 'the ' || ev.resource || ' module is turned off' end
  end`

/** Why the delivery could not be sent now, as the engine would decide it; null if it could. */
export const holdReason = async (sql: Tx, id: string): Promise<string | null> => {
  const [r] = await sql.unsafe<{ reason: string | null }[]>(
    `select ${HOLD_REASON} as reason from ${DELIVERY_FROM} where d.id = $1`,
    [id]
  )
  return r?.reason ?? null
}
