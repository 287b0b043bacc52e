// Raising an alert (docs/events.md#failure-alerts): a destination's change of state (failing,
// recovered, switched off) becomes one alert event, in the transaction that made the change.
// The event is written to the outbox (service.events) out of the app's stream: at commit_lsn
// 0/0 with a negative seq (sql/060), behind every fan-out cursor, so fan-out never reads it;
// this writer makes its deliveries itself, due at once, for the destinations that take it
// (the company's endpoints that chose it; for a subscription's alert, the key's own
// subscriptions to it), never the destination it is about, each through its filter. From
// there claim, signing, retries, Send Again and replay treat them like every delivery. One
// mail row per alert is queued for the mailer (mail.ts) when mail is configured.
import type { Tx } from "../../platform/db/Database.ts"
import { DELIVERIES_CHANNEL } from "../../platform/db/channels.ts"
import { uuidv7 } from "../../pipeline/outbox/ids.ts"
import { ALERT_RESOURCE, type AlertKind } from "../../domain/event-kinds.ts"
import { matches, type Filter } from "../../domain/filters/filter.ts"
import { originOf } from "../net/origin.ts"
import { alertMail } from "./mail-text.ts"

export type AlertChange = {
  readonly kind: AlertKind
  readonly endpointId: string | null
  readonly subscriptionId: string | null
  /** The error of the attempt that made the change, when there was one. */
  readonly lastError: string | null
  readonly lastAttemptAt: Date | null
  /** switched_off: "service", or the admin's e-mail. */
  readonly by?: string | undefined
}

export type RaiseOptions = {
  /** When the deliveries fall due (the engine's clock); default: the database's now. */
  readonly now?: Date | undefined
  /** Queue a mail for each alert (SMTP_URL is set). */
  readonly mail: boolean
}

type DestRow = {
  id: string
  company_id: string
  name: string | null
  url: string
  events: string[]
  key_id: string | null
  since: Date | null
  failures: number
  switched_off_at: Date | null
}

/** The destination, moved to its new alert state; none when the change was made already (or it is gone). */
const transition = async (tx: Tx, c: AlertChange): Promise<DestRow | undefined> => {
  const endpoint = c.endpointId !== null
  const table = endpoint ? "service.webhook_endpoints" : "service.webhook_subscriptions"
  const set =
    c.kind === "webhook.failing"
      ? "failing_since = coalesce($2::timestamptz, now()) where t.id = $1 and t.failing_since is null"
      : c.kind === "webhook.recovered"
        ? "failing_since = null where t.id = $1 and t.failing_since is not null"
        : "failing_since = t.failing_since where t.id = $1"
  // An endpoint's run of fully failed deliveries is its health counter (already written by this
  // transaction); it is reset by the success that recovers it.
  const columns = endpoint
    ? "t.name, t.url, t.events, null::text as key_id, case when not t.enabled then coalesce(t.disabled_at, now()) end as switched_off_at, t.consecutive_failures as failures"
    : "null::text as name, t.url, array[t.event] as events, t.key_id::text, case when not t.active then now() end as switched_off_at, 0 as failures"
  const [r] = await tx.unsafe<DestRow[]>(
    `with old as (select failing_since from ${table} where id = $1 for update)
     update ${table} t set ${set}
     returning t.id::text, t.company_id::text, ${columns},
       coalesce((select failing_since from old), t.failing_since, now()) as since`,
    c.kind === "webhook.failing"
      ? [c.endpointId ?? c.subscriptionId, c.lastAttemptAt]
      : [c.endpointId ?? c.subscriptionId]
  )
  if (r === undefined) return undefined
  if (endpoint && c.kind !== "webhook.recovered") return r
  // Otherwise: fully failed deliveries since it began failing, the start of the attempt that
  // made it fail (retries end within two days of a delivery's making).
  const [n] = await tx.unsafe<{ n: number }[]>(
    `select count(*)::int as n from service.webhook_deliveries d
     where ${endpoint ? "d.endpoint_id" : "d.subscription_id"} = $1 and d.state = 'failed' and d.finished_at >= $2
       and d.created_at >= $2::timestamptz - interval '2 days' and d.event not like 'webhook.%'`,
    [r.id, r.since]
  )
  return { ...r, failures: n?.n ?? 0 }
}

const iso = (d: Date | null) => (d === null ? null : d.toISOString())

/** The alert's data (docs/events.md#failure-alerts), in this order. */
const dataOf = (c: AlertChange, d: DestRow) =>
  JSON.stringify({
    destination: { kind: c.endpointId !== null ? "endpoint" : "subscription", id: d.id, url: d.url, events: d.events },
    failedDeliveries: d.failures,
    lastError: c.lastError,
    lastAttemptAt: iso(c.lastAttemptAt),
    switchedOffAt: c.kind === "webhook.switched_off" ? iso(d.switched_off_at) : null,
    switchedOffBy: c.kind === "webhook.switched_off" ? (c.by ?? "service") : null
  })

type Target = { endpoint_id: string | null; subscription_id: string | null; url: string; filter: Filter | null }

/** Who takes an alert about `d`: never `d` itself; a key hears only about its own subscriptions. */
const TARGETS = `
  select w.id::text as endpoint_id, null::text as subscription_id, w.url, w.filter
  from service.webhook_endpoints w join service.companies co on co.id = w.company_id and co.tier = 'company'
  where w.company_id = $1 and w.enabled and $2 = any(w.events) and w.id <> $3
  union all
  select null, s.id::text, s.url, s.filter
  from service.webhook_subscriptions s
  join service.companies co on co.id = s.company_id and co.tier = 'company' and co.api_enabled
  join service.api_keys k on k.id = s.key_id and k.revoked_at is null and (k.expires_at is null or k.expires_at > now()) and k.webhooks
  join service.webhook_key_secrets ks on ks.key_id = s.key_id
  where s.key_id = $4::uuid and s.event = $2 and s.active and s.id <> $3`

/** Raises each change that is one (a destination already failing is not failing again), in `tx`. */
export const raiseAlerts = async (
  tx: Tx,
  changes: ReadonlyArray<AlertChange>,
  options: RaiseOptions
): Promise<ReadonlyArray<string>> => {
  const raised: Array<string> = []
  for (const c of changes) {
    const d = await transition(tx, c)
    if (d === undefined) continue
    const eventId = uuidv7()
    const data = dataOf(c, d)
    await tx.unsafe(
      `insert into service.events (id, company_id, event, resource, record_id, commit_lsn, seq, payload, created_at)
       values ($1, $2, $3, '${ALERT_RESOURCE}', $4, '0/0', nextval('service.webhook_alert_seq'), $5, now())`,
      [eventId, d.company_id, c.kind, d.id, data]
    )
    await tx.unsafe(
      `insert into service.webhook_alerts (event_id, company_id, kind, endpoint_id, subscription_id, key_id)
       values ($1, $2, $3, $4, $5, $6)`,
      [eventId, d.company_id, c.kind, c.endpointId, c.subscriptionId, d.key_id]
    )
    const parsed = JSON.parse(data) as unknown
    const targets = (await tx.unsafe<Target[]>(TARGETS, [d.company_id, c.kind, d.id, d.key_id])).filter(
      (t) => t.filter === null || matches(t.filter, parsed)
    )
    if (targets.length > 0) {
      await tx.unsafe(
        `insert into service.webhook_deliveries (id, event_id, company_id, event, endpoint_id, subscription_id, origin, next_attempt_at)
         select service.webhook_delivery_id($1, t.endpoint_id, t.subscription_id), $1, $2, $3, t.endpoint_id, t.subscription_id,
           ${originOf("t.url")}, coalesce($7::timestamptz, now())
         from unnest($4::uuid[], $5::uuid[], $6::text[]) as t(endpoint_id, subscription_id, url)
         on conflict do nothing`,
        [
          eventId,
          d.company_id,
          c.kind,
          targets.map((t) => t.endpoint_id),
          targets.map((t) => t.subscription_id),
          targets.map((t) => t.url),
          options.now ?? null
        ]
      )
    }
    if (options.mail) await queueMail(tx, c, d, eventId)
    raised.push(eventId)
  }
  if (raised.length > 0) {
    await tx`select pg_notify(${DELIVERIES_CHANNEL}, ''), pg_notify(${MAIL_CHANNEL}, '')`
  }
  return raised
}

/** Tells the mailer at commit that a mail is queued. */
export const MAIL_CHANNEL = "service_alert_mails"

/** The company's admins for an endpoint; the admin who made the key for a subscription. */
const queueMail = async (tx: Tx, c: AlertChange, d: DestRow, eventId: string) => {
  const [r] =
    c.endpointId !== null
      ? await tx.unsafe<{ to: string[] | null }[]>(
          `select array_agg(distinct u.email order by u.email) as to from service.users u
           where u.company_id = $1 and u.role = 'admin' and u.email <> ''`,
          [d.company_id]
        )
      : await tx.unsafe<{ to: string[] | null }[]>(
          `select case when k.created_by_email is null then null else array[k.created_by_email] end as to
           from service.api_keys k where k.id = $1::uuid`,
          [d.key_id]
        )
  const to = r?.to ?? []
  if (to.length === 0) return
  const text = alertMail(c.kind, {
    kind: c.endpointId !== null ? "endpoint" : "subscription",
    name: d.name,
    url: d.url,
    failures: d.failures,
    lastError: c.lastError,
    by: c.by ?? null
  })
  await tx.unsafe(
    `insert into service.alert_mails (company_id, event_id, recipients, subject, body) values ($1, $2, $3, $4, $5)
     on conflict do nothing`,
    [d.company_id, eventId, to, text.subject, text.body]
  )
}
