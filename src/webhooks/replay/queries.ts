// What the faces ask about replays besides making and cancelling them (manage.ts): the
// replays running now, whose a destination is (to check an admin against it), and Turn On's
// offer to replay what failed while an endpoint was off.
import { Effect } from "effect"
import { query, Sql } from "../../platform/db/Sql.ts"
import { runningReplays, type ReplayView } from "./jobs.ts"

/** Replays being sent now, oldest first, with their progress. */
export const replaysRunning: Effect.Effect<ReadonlyArray<ReplayView>, never, Sql> = Effect.flatMap(Sql, ({ pool }) =>
  Effect.promise(() => runningReplays(pool))
)

/** The company of the endpoint or subscription with this id (as text, any case), if there is one. */
export const destinationCompany = (id: string): Effect.Effect<string | undefined, never, Sql> =>
  query(
    (sql) => sql<{ company_id: string }[]>`
    select company_id::text from service.webhook_endpoints where id::text = ${id.trim().toLowerCase()}
    union all select company_id::text from service.webhook_subscriptions where id::text = ${id.trim().toLowerCase()}`
  ).pipe(Effect.map(([owner]) => owner?.company_id))

export type ReplayOffer = { readonly since: string; readonly until: string; readonly at: string }

/**
 * Turn On's offer, while it stands: the endpoint's last Turn On recorded the window it was
 * off (its activity entry's details, src/webhooks/endpoints.ts) and no replay of it was made
 * since, nor was it switched off again.
 */
export const pendingReplayOffer = (
  companyId: string,
  endpointId: string
): Effect.Effect<ReplayOffer | null, never, Sql> =>
  query(
    (sql) => sql<{ at: Date; since: string | null; until: string | null }[]>`
    select a.at, a.details->'replayWhatFailed'->>'since' as since, a.details->'replayWhatFailed'->>'until' as until
    from service.activity a
    where a.company_id = ${companyId} and a.kind = 'endpoint.enabled' and a.subject_id = ${endpointId}
      and not exists (select 1 from service.webhook_replays p where p.endpoint_id = ${endpointId}::uuid and p.created_at > a.at)
      and not exists (select 1 from service.activity b where b.company_id = a.company_id and b.subject_id = a.subject_id
        and b.kind = 'endpoint.switched_off' and b.at > a.at)
    order by a.at desc limit 1`
  ).pipe(
    Effect.map(([r]) =>
      r && r.since !== null && r.until !== null ? { since: r.since, until: r.until, at: r.at.toISOString() } : null
    )
  )
