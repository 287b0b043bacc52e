// Webhooks (docs/events.md#destinations): `endpoints` create | update | rotate-secret | delete | enable | test |
// list | deliveries, `deliveries resend`, `subscriptions` list | disable | enable | delete
// (those keys made through the API) and `activity`. Commands that change something need
// --as <admin e-mail>; an id is always looked up within that admin's company.
import { invalid } from "../../../domain/errors.ts"
import { Console, Effect, Option } from "effect"
import { Command, Flag } from "effect/cli"
import { userActor, type Actor as WebhookActor } from "../../../access/activity.ts"
import { LOG_SIZE } from "../../../webhooks/deliveries/deliveries.ts"
import { ACTIVITY_FILTERS } from "../../../access/activity.ts"
import { DEFAULT_OVERLAP } from "../../../webhooks/endpoints/overlap.ts"
import type { EndpointView } from "../../../webhooks/endpoints/endpoints.ts"
import type { CircuitView } from "../../../webhooks/endpoints/circuit.ts"
import { checked, MAX_RATE_LIMIT, MIN_RATE_LIMIT, parseRateLimitText } from "../../../webhooks/endpoints/validate.ts"
import { Webhooks, WebhooksLive, type WebhooksShape } from "../../../webhooks/service.ts"
import { findAdmin, findCompany, type Company } from "../../../access/identity.ts"
import {
  asAdminFlags,
  asOptional,
  asRequired,
  CheckFailed,
  company,
  companyOptional,
  json,
  optionalAdmin,
  listing,
  output,
  table,
  when,
  withDatabase,
  optionalText,
  idArgument
} from "../support.ts"

/** The work of a command, with the webhook operations and the database. */
const withWebhooks = <A, E, R>(effect: Effect.Effect<A, E, R>) => withDatabase(Effect.provide(effect, WebhooksLive))

/** The admin named by --as (in --company when given, else in the one company they administer). */
const adminOf = (as: string, companyRef: Option.Option<string>) =>
  Effect.gen(function* () {
    const named = Option.isSome(companyRef) ? yield* findCompany(companyRef.value) : undefined
    return yield* findAdmin(as, named)
  })

/** For reading by id: scoped to --company / --as when given, else any company. */
const scopeOf = (as: Option.Option<string>, companyRef: Option.Option<string>) =>
  Option.isSome(as)
    ? Effect.map(adminOf(as.value, companyRef), (a): string | undefined => a.companyId)
    : Option.isSome(companyRef)
      ? Effect.map(findCompany(companyRef.value), (c): string | undefined => c.id)
      : Effect.succeed<string | undefined>(undefined)

const eventsFlag = Flag.String("events").pipe(
  Flag.withDescription("Event names separated by commas, e.g. incident.created,corrective_action.closed")
)

const rateLimitFlag = Flag.String("rate-limit").pipe(
  Flag.withDescription(
    `At most this many deliveries a second (decimals allowed, e.g. 5 or 0.5), from ${MIN_RATE_LIMIT} to ${MAX_RATE_LIMIT}; none for no limit`
  ),
  Flag.optional
)
const orderingFlag = optionalText(
  "ordering",
  "record: the events of one record arrive in the order they happened; none: no order"
)

const filterFlag = optionalText(
  "filter",
  'A content filter, JSON over the fields of the event\'s data, e.g. \'{"severity": {"$in": ["serious"]}}\'; none to remove it'
)
const payloadFlag = optionalText(
  "payload",
  "thin: send only the record's id, company and API address; full: the record (the default)"
)

/** --filter's text as the operation takes it: JSON (checked there), null for none. */
const filterOf = (flag: Option.Option<string>) =>
  Option.isNone(flag)
    ? Effect.succeed<unknown>(undefined)
    : flag.value.trim() === "none"
      ? Effect.succeed<unknown>(null)
      : Effect.try({
          try: () => JSON.parse(flag.value) as unknown,
          catch: () => invalid('--filter must be JSON, e.g. \'{"severity": "serious"}\', or none', { field: "filter" })
        })

/** --rate-limit's text as the operation takes it (a number or null), refused as the operation refuses. */
const rateLimitOf = (flag: Option.Option<string>) =>
  Option.isNone(flag) ? Effect.succeed(undefined) : checked(() => parseRateLimitText(flag.value))

/** A circuit in a word or a few: closed, or open since when and the next probe from when. */
export const circuitText = (c: CircuitView): string =>
  c.state === "closed"
    ? "closed"
    : `${c.state} since ${when(c.openedAt)} after ${c.failures} timeouts or refused connections; next probe from ${when(c.nextProbeAt)}${c.lastError === null ? "" : ` (${c.lastError})`}`

const describeEndpoint = (e: EndpointView) =>
  [
    `  url:      ${e.url}`,
    `  events:   ${e.events.join(", ")}`,
    `  state:    ${e.enabled ? "on" : `switched off${e.disabledReason === null ? "" : ` (${e.disabledReason})`}`}`,
    `  rate:     ${e.rateLimit === null ? "no limit" : `at most ${e.rateLimit} a second`}`,
    `  ordering: ${e.ordering === "record" ? "by record" : "none"}`,
    `  filter:   ${e.filter === null ? "none" : JSON.stringify(e.filter)}`,
    `  payload:  ${e.payload}`,
    `  circuit:  ${circuitText(e.circuit)}`
  ].join("\n")

// -----------------------------------------------------------------------------
// endpoints

const create = Command.make(
  "create",
  {
    company,
    name: Flag.String("name").pipe(Flag.withDescription("A name for the receiver")),
    url: Flag.String("url").pipe(Flag.withDescription("The receiver's https:// address")),
    events: eventsFlag,
    rateLimit: rateLimitFlag,
    ordering: orderingFlag,
    filter: filterFlag,
    payload: payloadFlag,
    as: asRequired,
    json
  },
  (args) =>
    asAdmin({ as: args.as, company: Option.some(args.company) }, (w, actor, companyId) =>
      Effect.gen(function* () {
        const created = yield* w.createEndpoint(actor, {
          companyId,
          name: args.name,
          url: args.url,
          events: args.events,
          rateLimit: yield* rateLimitOf(args.rateLimit),
          ordering: Option.getOrUndefined(args.ordering),
          filter: yield* filterOf(args.filter),
          payload: Option.getOrUndefined(args.payload)
        })
        yield* output(args.json, { id: created.id, secret: created.secret }, () =>
          [
            `Created webhook endpoint "${created.endpoint.name}" (${created.id}).`,
            describeEndpoint(created.endpoint),
            "",
            "The signing secret is shown this once; store it now:",
            "",
            `  ${created.secret}`,
            ""
          ].join("\n")
        )
      })
    )
).pipe(
  Command.withDescription("Add a webhook endpoint; its signing secret is shown once"),
  Command.withExamples([
    {
      command:
        "endpoints create --company acme.localhost --name Ops --url https://hooks.example.com/safety --events incident.created,corrective_action.closed --as admin@acme.example --json",
      description: 'Prints {"id": ..., "secret": "whsec_..."}'
    },
    {
      command:
        "endpoints create --company acme.localhost --name Ledger --url https://ledger.example.com/in --events corrective_action.created,corrective_action.closed --rate-limit 5 --ordering record --as admin@acme.example",
      description: "At most 5 deliveries a second, each action's events in the order they happened"
    }
  ])
)

/** Runs a webhook operation as the admin of --as, in their company (checked against --company when given). */
const asAdmin = <A, E, R>(
  args: { readonly as: string; readonly company: Option.Option<string> },
  run: (w: WebhooksShape, actor: WebhookActor, companyId: string) => Effect.Effect<A, E, R>
) =>
  withWebhooks(
    Effect.gen(function* () {
      const admin = yield* adminOf(args.as, args.company)
      return yield* run(yield* Webhooks, userActor(admin), admin.companyId)
    })
  )

/** Runs a webhook operation on the endpoint named by the id argument, as the admin of --as, in their company. */
const onEndpointAs = <A, E, R>(
  args: { readonly id: string; readonly as: string; readonly company: Option.Option<string> },
  run: (w: WebhooksShape, actor: WebhookActor, endpoint: { id: string; companyId: string }) => Effect.Effect<A, E, R>
) => asAdmin(args, (w, actor, companyId) => run(w, actor, { id: args.id, companyId }))

const update = Command.make(
  "update",
  {
    id: idArgument("The endpoint's id (see endpoints list)"),
    name: optionalText("name", "A new name"),
    url: optionalText("url", "A new https:// address"),
    events: eventsFlag.pipe(Flag.optional),
    rateLimit: rateLimitFlag,
    ordering: orderingFlag,
    filter: filterFlag,
    payload: payloadFlag,
    ...asAdminFlags
  },
  (args) =>
    onEndpointAs(args, (w, actor, endpoint) =>
      Effect.gen(function* () {
        const e = yield* w.updateEndpoint(actor, {
          ...endpoint,
          name: Option.getOrUndefined(args.name),
          url: Option.getOrUndefined(args.url),
          events: Option.getOrUndefined(args.events),
          rateLimit: yield* rateLimitOf(args.rateLimit),
          ordering: Option.getOrUndefined(args.ordering),
          filter: yield* filterOf(args.filter),
          payload: Option.getOrUndefined(args.payload)
        })
        yield* output(args.json, e, () =>
          [`Updated webhook endpoint "${e.name}" (${e.id}).`, describeEndpoint(e)].join("\n")
        )
      })
    )
).pipe(
  Command.withDescription(
    "Change an endpoint's name, address, events, rate (--rate-limit, none for no limit), ordering (--ordering record or none), filter (--filter '<json>', none to remove) or payload (--payload thin or full)"
  )
)

/** A change to one endpoint: `<name> <id> --as <admin> [--company] [--json]`; `run` does the
 *  operation as that admin, in that admin's company, and prints its answer. */
const onEndpoint = <E, R>(
  name: string,
  description: string,
  run: (
    w: WebhooksShape,
    actor: WebhookActor,
    ref: { id: string; companyId: string },
    json: boolean
  ) => Effect.Effect<void, E, R>
) =>
  Command.make(name, { id: idArgument("The endpoint's id"), ...asAdminFlags }, (args) =>
    onEndpointAs(args, (w, actor, endpoint) => run(w, actor, endpoint, args.json))
  ).pipe(Command.withDescription(description))

const rotateSecret = Command.make(
  "rotate-secret",
  {
    id: idArgument("The endpoint's id"),
    overlap: Flag.String("overlap").pipe(
      Flag.withDescription(
        `How long the old secret keeps signing every delivery beside the new one, so the receiver can switch when it likes: e.g. ${DEFAULT_OVERLAP} (the default), 90m, 7d (the most), 3600s, 1h30m, or 0 for none`
      ),
      Flag.optional
    ),
    ...asAdminFlags
  },
  (args) =>
    onEndpointAs(args, (w, actor, endpoint) =>
      Effect.gen(function* () {
        const r = yield* w.rotateEndpointSecret(actor, { ...endpoint, overlap: Option.getOrUndefined(args.overlap) })
        yield* output(args.json, r, () =>
          [
            `New signing secret of endpoint ${r.id}; deliveries are signed with it from now on.`,
            r.previousSecretExpiresAt === null
              ? "The old secret no longer signs anything."
              : `Until ${when(r.previousSecretExpiresAt)} they are signed with the old secret too (two v1 signatures in each header): give the receiver the new one before then.`,
            "The new secret is shown this once:",
            "",
            `  ${r.secret}`,
            ""
          ].join("\n")
        )
      })
    )
).pipe(
  Command.withDescription(
    `Give an endpoint a new signing secret (shown once); new deliveries use it at once, and the old one signs beside it for the overlap (--overlap, ${DEFAULT_OVERLAP} unless told)`
  ),
  Command.withExamples([
    {
      command: "endpoints rotate-secret <id> --as admin@acme.example",
      description: `The old secret signs beside the new one for ${DEFAULT_OVERLAP}`
    },
    {
      command: "endpoints rotate-secret <id> --overlap 0 --as admin@acme.example --json",
      description: "The old secret stops signing at once (e.g. it leaked)"
    }
  ])
)

const remove = onEndpoint("delete", "Delete an endpoint and its pending deliveries", (w, actor, ref, asJson) =>
  Effect.flatMap(w.deleteEndpoint(actor, ref), () =>
    output(asJson, { id: ref.id, deleted: true }, () => `Deleted webhook endpoint ${ref.id}.`)
  )
)

const enable = onEndpoint(
  "enable",
  "Turn On: an endpoint that was switched off receives deliveries again",
  (w, actor, ref, asJson) =>
    Effect.flatMap(w.enableEndpoint(actor, ref), (e) =>
      output(asJson, e, () =>
        [
          `Turned on webhook endpoint "${e.name}" (${e.id}).`,
          describeEndpoint(e),
          ...(e.replayWhatFailed !== null
            ? [
                "",
                "To send what failed while it was off (count first):",
                `  npm run admin -- replay --endpoint ${e.id} --failed --since ${e.replayWhatFailed.since} --until ${e.replayWhatFailed.until} --dry-run`
              ]
            : [])
        ].join("\n")
      )
    )
)

const test = onEndpoint(
  "test",
  "Send a signed ping event now and show the receiver's status, time and the start of its answer",
  (w, actor, ref, asJson) =>
    Effect.flatMap(w.testEndpoint(actor, ref), ({ errorKind, ...r }) =>
      output(asJson, r, () =>
        [
          r.ok
            ? `The receiver accepted the test event: HTTP ${r.status} in ${r.durationMs} ms.`
            : `The test event failed after ${r.durationMs} ms: ${r.error ?? `HTTP ${r.status}`}`,
          `  status:   ${r.status ?? "-"}`,
          `  time:     ${r.durationMs} ms`,
          `  answer:   ${r.response === "" ? "(empty)" : r.response.replace(/\s+/g, " ").slice(0, 200)}`,
          `  ping id:  ${r.deliveryId} (its Service-Delivery header; a test event is not kept in the delivery log)`
        ].join("\n")
      ).pipe(
        Effect.andThen(
          r.ok
            ? Effect.void
            : Effect.fail(
                new CheckFailed({
                  message: `the receiver did not accept the test event (${r.error ?? `HTTP ${r.status}`})`,
                  // A stored address had its form checked: "refused" now is for the address.
                  ...(errorKind === "refused"
                    ? { reason: "address_not_public" as const }
                    : errorKind === "tls"
                      ? { reason: "tls" as const }
                      : {})
                })
              )
        )
      )
    )
)

/** Runs a read of a company's webhook things: --company, or the company of --as. */
const inCompany = <A, E, R>(
  args: { readonly company: string; readonly as: Option.Option<string> },
  run: (w: WebhooksShape, company: Company) => Effect.Effect<A, E, R>
) =>
  withWebhooks(
    Effect.gen(function* () {
      const { company } = yield* optionalAdmin(args.company, args.as)
      return yield* run(yield* Webhooks, company)
    })
  )

/** A command listing a company's webhook things: JSON with --json, else a titled table. */
const companyListing = <A, E, R>(
  description: string,
  rowsOf: (w: WebhooksShape, companyId: string) => Effect.Effect<ReadonlyArray<A>, E, R>,
  text: (company: Company) => { readonly empty: string; readonly title: string },
  headers: ReadonlyArray<string>,
  row: (a: A) => ReadonlyArray<string>
) =>
  Command.make("list", { company, as: asOptional, json }, (args) =>
    inCompany(args, (w, company) =>
      Effect.gen(function* () {
        const rows = yield* rowsOf(w, company.id)
        yield* output(args.json, rows, () => listing(rows, text(company), headers, () => rows.map(row)))
      })
    )
  ).pipe(Command.withDescription(description))

const list = companyListing(
  "List a company's webhook endpoints: address, events, on or switched off (and why), rate, ordering, circuit",
  (w, companyId) => w.listEndpoints({ companyId }),
  (company) => ({
    empty: `${company.name} (${company.host}) has no webhook endpoints.`,
    title: `Webhook endpoints of ${company.name} (${company.host}):`
  }),
  ["ID", "NAME", "URL", "EVENTS", "STATE", "FAILURES IN A ROW", "RATE", "ORDERING", "CIRCUIT", "MADE BY", "CREATED"],
  (e) => [
    e.id,
    e.name,
    e.url,
    e.events.join(","),
    e.enabled ? "on" : `off: ${e.disabledReason ?? "switched off"}`,
    String(e.consecutiveFailures),
    e.rateLimit === null ? "-" : `${e.rateLimit}/s`,
    e.ordering === "record" ? "record" : "-",
    e.circuit.state === "closed" ? "closed" : `${e.circuit.state}, next probe ${when(e.circuit.nextProbeAt)}`,
    e.createdBy ?? "-",
    when(e.createdAt)
  ]
)

const endpointDeliveries = Command.make(
  "deliveries",
  { id: idArgument("The endpoint's id"), company: companyOptional, as: asOptional, json },
  (args) =>
    withWebhooks(
      Effect.gen(function* () {
        const w = yield* Webhooks
        const companyId = yield* scopeOf(args.as, args.company)
        const rows = yield* w.listEndpointDeliveries({ endpointId: args.id, companyId })
        yield* output(args.json, rows, () =>
          listing(
            rows,
            {
              empty: `Endpoint ${args.id} has no deliveries yet.`,
              title: `The last ${LOG_SIZE} deliveries of endpoint ${args.id}, newest first:`
            },
            ["ID", "EVENT", "STATE", "STATUS OR ERROR", "ATTEMPTS", "CREATED", "LAST ATTEMPT", "NEXT ATTEMPT"],
            () =>
              rows.map((d) => [
                d.id,
                d.event,
                d.state,
                // One spelling for a status, answered or failed: HTTP 200, HTTP 500.
                d.lastError !== null && !/^http \d{3}$/.test(d.lastError)
                  ? d.lastError
                  : d.lastStatus === null
                    ? (d.heldReason ?? d.lastError ?? "-")
                    : `HTTP ${d.lastStatus}`,
                String(d.attempts),
                when(d.createdAt),
                when(d.lastAttemptAt),
                when(d.nextAttemptAt)
              ])
          )
        )
      })
    )
).pipe(Command.withDescription(`An endpoint's last ${LOG_SIZE} deliveries: HTTP status or error, attempts and times`))

export const endpoints = Command.make("endpoints").pipe(
  Command.withDescription("Webhook endpoints: create, update, rotate-secret, delete, enable, test, list, deliveries"),
  Command.withSubcommands([create, update, rotateSecret, remove, enable, test, list, endpointDeliveries])
)

// -----------------------------------------------------------------------------
// deliveries

const resend = Command.make(
  "resend",
  {
    id: idArgument("The delivery's id (see endpoints deliveries)"),
    ...asAdminFlags
  },
  (args) =>
    asAdmin(args, (w, actor, companyId) =>
      Effect.gen(function* () {
        const d = yield* w.resendDelivery(actor, { id: args.id, companyId })
        yield* output(args.json, d, () => `Delivery ${d.id} (${d.event}) will be sent again at once, with the same id.`)
      })
    )
).pipe(Command.withDescription("Send Again: one attempt at once, with the same delivery id"))

export const deliveries = Command.make("deliveries").pipe(
  Command.withDescription("Webhook deliveries: resend"),
  Command.withSubcommands([resend])
)

// -----------------------------------------------------------------------------
// subscriptions (made by API keys through POST /api/v1/hooks)

const subscriptionsList = companyListing(
  "List the webhook subscriptions a company's API keys made",
  (w, companyId) => w.listSubscriptions({ companyId }),
  (company) => ({
    empty: `${company.name} (${company.host}) has no subscriptions made through the API.`,
    title: `Subscriptions made through the API by keys of ${company.name} (${company.host}):`
  }),
  ["ID", "KEY", "EVENT", "URL", "STATE", "RATE", "ORDERING", "CIRCUIT", "CREATED"],
  (s) => [
    s.id,
    s.keyName ?? s.keyId,
    s.event,
    s.url,
    s.active ? "on" : "off",
    s.rateLimit === null ? "-" : `${s.rateLimit}/s`,
    s.ordering === "record" ? "record" : "-",
    s.circuit.state === "closed" ? "closed" : `${s.circuit.state}, next probe ${when(s.circuit.nextProbeAt)}`,
    when(s.createdAt)
  ]
)

const subscriptionChange = (name: "disable" | "enable" | "delete", description: string) =>
  Command.make(
    name,
    {
      id: idArgument("The subscription's id (see subscriptions list)"),
      ...asAdminFlags
    },
    (args) =>
      asAdmin(args, (w, actor, companyId) =>
        Effect.gen(function* () {
          const target = { id: args.id, companyId }
          if (name === "delete") {
            yield* w.deleteSubscription(actor, target)
            return yield* output(args.json, { id: args.id, deleted: true }, () => `Deleted subscription ${args.id}.`)
          }
          const s =
            name === "disable"
              ? yield* w.disableSubscription(actor, target)
              : yield* w.enableSubscription(actor, target)
          yield* output(
            args.json,
            s,
            () => `Turned ${s.active ? "on" : "off"} subscription ${s.id} (${s.event} to ${s.url}).`
          )
        })
      )
  ).pipe(Command.withDescription(description))

export const subscriptions = Command.make("subscriptions").pipe(
  Command.withDescription("Webhook subscriptions made by API keys: list, disable, enable, delete"),
  Command.withSubcommands([
    subscriptionsList,
    subscriptionChange("disable", "Turn a subscription off: it receives nothing until turned on"),
    subscriptionChange("enable", "Turn a subscription on again"),
    subscriptionChange("delete", "Delete a subscription")
  ])
)

// -----------------------------------------------------------------------------
// activity

const ACTIVITY_LIMIT = 200

export const activity = Command.make(
  "activity",
  {
    company,
    kind: Flag.Literals("kind", ACTIVITY_FILTERS).pipe(
      Flag.withDescription("Only this kind (e.g. endpoint.created) or family (e.g. endpoint)"),
      Flag.optional
    ),
    as: asOptional,
    json
  },
  (args) =>
    inCompany(args, (w, company) =>
      Effect.gen(function* () {
        const kind = Option.getOrUndefined(args.kind)
        const entries = yield* w.listActivity({ companyId: company.id, limit: ACTIVITY_LIMIT, kind })
        if (!args.json && entries.length === 0)
          return yield* Console.log(
            `No activity${kind === undefined ? "" : ` of kind ${kind}`} for ${company.name} (${company.host}).`
          )
        yield* output(args.json, entries, () =>
          table(
            ["WHEN", "WHO", "WHAT", "SUBJECT", "DETAILS"],
            entries.map((e) => [
              when(e.at),
              e.actorEmail ?? (typeof e.details.byKey === "string" ? `key ${e.details.byKey}` : "service"),
              e.kind,
              e.subjectId ?? "-",
              JSON.stringify(e.details)
            ])
          )
        )
      })
    )
).pipe(
  Command.withDescription("A company's activity log, newest first: who changed which endpoint, subscription or key")
)
