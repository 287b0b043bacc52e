// The read API as an HttpApi: every endpoint, its parameters, its answers and its errors.
// The OpenAPI document (/api/v1/openapi.json) and the docs page (/docs) are generated from
// this definition, and the server decodes requests with the same schemas.
//
// Adding a group (the webhooks work adds `hooks`, and `events` for GET /api/v1/events):
// define it next to this file and add it in ServiceApi below, before the middleware lines,
// so that it is authenticated and rate limited like every other group.
import { Schema } from "effect"
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSecurity, OpenApi } from "effect/http-api"
import { WEBHOOK_EVENTS } from "../../domain/event-kinds.ts"
import { RESOURCE_INFO, RESOURCES, type Resource } from "../../domain/resources.ts"
import type { CurrentKey } from "../../access/keys/current-key.ts"
import { BadRequest, Forbidden, NotFound, TooManyRequests, Unauthorized } from "../http/errors.ts"
import { DeletionsGroup } from "./deletions-api.ts"
import { StreamGroup } from "./stream-api.ts"
import { NextCursor } from "./paging.ts"
import { HooksGroup } from "./hooks.ts"
import { EventsGroup } from "./events-api.ts"
import { completeDocument } from "./document.ts"
import { API_INDEX_EXAMPLE } from "./examples.ts"
import { BASE_QUERY, NAME_QUERY, STATUS_QUERY } from "./query.ts"
import { RECORD_SCHEMAS } from "./records.ts"

export const API_PREFIX = "/api/v1"
export const OPENAPI_PATH = "/api/v1/openapi.json"
export const DOCS_PATH = "/docs"

// -----------------------------------------------------------------------------
// Middleware (implemented in auth.ts and request-errors.ts)

/** Bearer API key: 401 unknown/revoked/expired/other company, 429 over the limit, 403 off; 400 for a parameter a path does not take. */
export class ApiKeyAuth extends HttpApiMiddleware.Service<ApiKeyAuth, { provides: CurrentKey }>()(
  "service/api/ApiKeyAuth",
  {
    security: {
      apiKey: HttpApiSecurity.bearer.pipe(
        HttpApiSecurity.annotate(OpenApi.Description, "An API key: Authorization: Bearer mk_...")
      )
    },
    error: [Unauthorized, Forbidden, TooManyRequests, BadRequest]
  }
) {}

/** Turns a request that does not decode (query parameters, a body) into a 400 naming what is wrong (after the key's own refusal, if it has one now). */
export class RequestErrors extends HttpApiMiddleware.Service<RequestErrors>()("service/api/RequestErrors", {
  error: [BadRequest, Unauthorized, Forbidden]
}) {}

// -----------------------------------------------------------------------------
// GET /api/v1

const Timestamp = Schema.String.annotate({
  description: "ISO 8601 timestamp in UTC with milliseconds",
  format: "date-time"
})

export const ApiIndex = Schema.Struct({
  company: Schema.Struct({ id: Schema.String, name: Schema.String }),
  key: Schema.Struct({
    id: Schema.String,
    name: Schema.String,
    expiresAt: Schema.NullOr(Timestamp).annotate({ description: "null: the key does not expire" }),
    webhooks: Schema.Boolean.annotate({ description: "The key may subscribe itself to events (POST /api/v1/hooks)" })
  }),
  resources: Schema.Array(Schema.Struct({ name: Schema.Literals(RESOURCES), path: Schema.String })).annotate({
    description: "What the key can read now: its resources whose module is turned on"
  }),
  events: Schema.Array(Schema.Literals(WEBHOOK_EVENTS)).annotate({
    description:
      "Events the key may subscribe to: none without the webhooks permission, else those about records it can read"
  })
}).annotate({ identifier: "ApiIndex", description: "What this key can read now", examples: [API_INDEX_EXAMPLE] })

export class RootGroup extends HttpApiGroup.make("api")
  .add(
    HttpApiEndpoint.get("index", API_PREFIX, { success: ApiIndex }).annotateMerge(
      OpenApi.annotations({
        summary: "What this key can read",
        description:
          "The key's company, the key, the resources it can read now and the events it may subscribe to. Doubles as a check that the key works."
      })
    )
  )
  .annotateMerge(OpenApi.annotations({ title: "key", description: "The API key in use" })) {}

// -----------------------------------------------------------------------------
// The 14 resources: GET /api/v1/<resource> and GET /api/v1/<resource>/{id}

const title = (resource: Resource) => RESOURCE_INFO[resource].description

const FILTER_TEXT: Readonly<Record<"name" | "status", string>> = {
  name: "name filters by part of the name.",
  status: "status filters by status (open and closed are groups)."
}

const listDescription = (resource: Resource) =>
  [
    `${title(resource)} of the key's company, newest first (by createdAt, then id), paged with nextCursor (limit up to 200, 50 by default).`,
    `createdAfter and createdBefore bound the creation time; updatedAfter and updatedBefore the change time. ${RESOURCE_INFO[resource].filters.map((f) => FILTER_TEXT[f]).join(" ")}`.trim(),
    "To keep a copy in step: sort=updatedAt (oldest change first) with updatedAfter=<the nextUpdatedAfter of the last page of your previous sync>, then GET /api/v1/deletions."
  ].join("\n\n")

const resourceGroup = <const R extends Resource, S extends Schema.Top, Q extends Schema.Struct.Fields>(
  resource: R,
  record: S,
  query: Q
) =>
  HttpApiGroup.make(resource)
    .add(
      HttpApiEndpoint.get("list", `${API_PREFIX}/${resource}`, {
        query,
        success: Schema.Struct({
          data: Schema.Array(record).annotate({
            description:
              "Newest first (by createdAt, then id); with sort=updatedAt, oldest change first (by change time, then id)"
          }),
          nextCursor: NextCursor,
          nextUpdatedAfter: Schema.optionalKey(
            Schema.NullOr(Timestamp).annotate({
              description:
                "Only with sort=updatedAt. On the last page (nextCursor null): the updatedAfter to pass next time to get only what changes after this answer (the change time of the last record, or the updatedAfter given when nothing changed). null while there are more pages (follow nextCursor: it never skips or repeats), or when nothing matched and no updatedAfter was given."
            })
          )
        }),
        error: BadRequest
      }).annotateMerge(
        OpenApi.annotations({
          summary: `List ${title(resource).toLowerCase()}`,
          description: listDescription(resource)
        })
      ),
      HttpApiEndpoint.get("get", `${API_PREFIX}/${resource}/:id`, {
        params: { id: Schema.String },
        success: Schema.Struct({ data: record }),
        error: NotFound
      }).annotateMerge(
        OpenApi.annotations({
          summary: `One record of ${resource}`,
          description: `The record with this id, as the list shows it. 404 when there is none of this company's ${resource}. Send the ETag of an earlier answer as If-None-Match to get 304 while the record is unchanged.`
        })
      )
    )
    .annotateMerge(OpenApi.annotations({ description: title(resource) }))

export const IncidentsGroup = resourceGroup("incidents", RECORD_SCHEMAS.incidents, BASE_QUERY)
export const ObservationsGroup = resourceGroup("observations", RECORD_SCHEMAS.observations, BASE_QUERY)
export const CorrectiveActionsGroup = resourceGroup(
  "corrective-actions",
  RECORD_SCHEMAS["corrective-actions"],
  STATUS_QUERY
)
export const AuditsGroup = resourceGroup("audits", RECORD_SCHEMAS.audits, BASE_QUERY)
export const InspectionsGroup = resourceGroup("inspections", RECORD_SCHEMAS.inspections, BASE_QUERY)
export const TrainingRecordsGroup = resourceGroup("training-records", RECORD_SCHEMAS["training-records"], BASE_QUERY)
export const WorkersGroup = resourceGroup("workers", RECORD_SCHEMAS.workers, NAME_QUERY)
export const JobSitesGroup = resourceGroup("job-sites", RECORD_SCHEMAS["job-sites"], NAME_QUERY)
export const ChangesGroup = resourceGroup("changes", RECORD_SCHEMAS.changes, BASE_QUERY)
export const PermitsGroup = resourceGroup("permits", RECORD_SCHEMAS.permits, BASE_QUERY)
export const PoliciesGroup = resourceGroup("policies", RECORD_SCHEMAS.policies, BASE_QUERY)
export const SdsGroup = resourceGroup("sds", RECORD_SCHEMAS.sds, BASE_QUERY)
export const RiskAssessmentsGroup = resourceGroup("risk-assessments", RECORD_SCHEMAS["risk-assessments"], BASE_QUERY)
export const SubcontractorsGroup = resourceGroup("subcontractors", RECORD_SCHEMAS.subcontractors, BASE_QUERY)

/** Query parameters each list takes, for messages about unknown ones. */
export const listParams = (resource: Resource): ReadonlyArray<string> => [
  "limit",
  "cursor",
  "createdAfter",
  "createdBefore",
  "updatedAfter",
  "updatedBefore",
  "sort",
  ...RESOURCE_INFO[resource].filters
]

export class ServiceApi extends HttpApi.make("service")
  .add(RootGroup)
  .add(
    IncidentsGroup,
    ObservationsGroup,
    CorrectiveActionsGroup,
    AuditsGroup,
    InspectionsGroup,
    TrainingRecordsGroup,
    WorkersGroup,
    JobSitesGroup,
    ChangesGroup,
    PermitsGroup,
    PoliciesGroup,
    SdsGroup,
    RiskAssessmentsGroup,
    SubcontractorsGroup
  )
  .add(HooksGroup) // webhooks: POST/GET /api/v1/hooks, GET/DELETE /api/v1/hooks/{id}
  .add(EventsGroup) // GET /api/v1/events, GET /api/v1/events/{id}
  .add(DeletionsGroup) // GET /api/v1/deletions
  .add(StreamGroup) // GET /api/v1/stream, /api/v1/consumers/**
  .middleware(RequestErrors)
  .middleware(ApiKeyAuth)
  .annotate(HttpApi.QueryParseOptions, { onExcessProperty: "error", errors: "first" })
  .annotateMerge(
    OpenApi.annotations({
      title: "Safety Records API",
      version: "1",
      description: [
        "Read-only access to a company's safety records with an API key (Authorization: Bearer mk_...).",
        'Lists are newest first and paged with nextCursor. Every error is JSON {"error": "..."}.',
        "To keep a copy in step, list with sort=updatedAt&updatedAfter=<the nextUpdatedAfter of your last sync> (oldest change first) and ask GET /api/v1/deletions?since=<the last deletedAt you saw> for what was deleted. Every record and list answer carries an ETag; If-None-Match with it answers 304 with no body.",
        "Each key may make 120 requests a minute; every answer carries the RateLimit and RateLimit-Policy headers, and a refused request gets 429 with Retry-After."
      ].join("\n\n"),
      servers: [
        { url: "/", description: "This service: the address this document was read from" },
        {
          url: "https://{host}",
          description:
            "Your company's address (host: its host name): a key works only at the address of its own company",
          // No description on the variable: @apidevtools/swagger-parser refuses one there.
          variables: { host: { default: "safety.example.com" } }
        }
      ],
      // Response headers, text parameters as what they hold, the events' discriminator, webhooks.
      transform: completeDocument
    })
  ) {}
