// The admin HTTP API (/admin/v1): the same operations as the admin CLI, for an admin token
// (issued by `npm run admin -- tokens create --as <admin e-mail>`). Its OpenAPI document is
// at /admin/v1/openapi.json.
//
// Adding a group (the webhooks work adds endpoints, subscriptions, deliveries, activity):
// define it in its own module and add it in AdminApi below, before the middleware lines.
import { Context, Effect, Schema } from "effect"
import {
  HttpApi,
  HttpApiEndpoint,
  HttpApiGroup,
  HttpApiMiddleware,
  HttpApiSchema,
  HttpApiSecurity,
  OpenApi
} from "effect/http-api"
import { answering, BadRequest, Conflict, NotFound, TooManyRequests, Unauthorized } from "../http/errors.ts"
import type { DomainError } from "../../domain/errors.ts"
import { RESOURCES } from "../../domain/resources.ts"
import type { AdminUser } from "../../access/identity.ts"
import { EXPIRY_CHOICES } from "../../access/keys/store.ts"
import { ReplaysGroup } from "./replays.ts"
import { WebhooksGroup } from "./webhooks.ts"

export const ADMIN_PREFIX = "/admin/v1"
export const ADMIN_OPENAPI_PATH = "/admin/v1/openapi.json"
export const ADMIN_DOCS_PATH = "/admin/v1/docs"

export class CurrentAdmin extends Context.Service<CurrentAdmin, AdminUser>()("service/admin/CurrentAdmin") {}

/** Runs an operation as the admin calling; its domain errors are the endpoint's answers. */
export const byAdmin = <A, R>(run: (admin: AdminUser) => Effect.Effect<A, DomainError, R>) =>
  answering(Effect.flatMap(CurrentAdmin, run))

export class AdminAuth extends HttpApiMiddleware.Service<AdminAuth, { provides: CurrentAdmin }>()(
  "service/admin/AdminAuth",
  {
    security: {
      adminToken: HttpApiSecurity.bearer.pipe(
        HttpApiSecurity.annotate(OpenApi.Description, "An admin token: Authorization: Bearer mat_...")
      )
    },
    // A parameter given to a path that takes none is refused here, before the handler; a client
    // past its failed authentications gets 429 without its token being looked up.
    error: [Unauthorized, BadRequest, TooManyRequests]
  }
) {}

export class AdminRequestErrors extends HttpApiMiddleware.Service<AdminRequestErrors>()(
  "service/admin/AdminRequestErrors",
  {
    error: BadRequest
  }
) {}

const Timestamp = Schema.String.annotate({ format: "date-time", description: "ISO 8601 timestamp in UTC" })
const State = Schema.Literals(["active", "expired", "revoked"])

export const KeyInfo = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  scopes: Schema.Array(Schema.String).annotate({ description: "Resources the key may read" }),
  webhooks: Schema.Boolean,
  state: State,
  createdAt: Timestamp,
  createdBy: Schema.NullOr(Schema.String).annotate({ description: "E-mail of the admin who made it" }),
  expiresAt: Schema.NullOr(Timestamp),
  revokedAt: Schema.NullOr(Timestamp),
  revokedBy: Schema.NullOr(Schema.String),
  lastUsedAt: Schema.NullOr(Timestamp).annotate({ description: "Updated every few seconds, not on each request" }),
  requestCount: Schema.Number
}).annotate({ identifier: "ApiKeyInfo" })

export const CreateKey = Schema.Struct({
  name: Schema.String.annotate({ description: "After what will use the key" }),
  read: Schema.Union([Schema.Literal("all"), Schema.Array(Schema.Literals(RESOURCES))]).annotate({
    description: "The resources the key may read, or all"
  }),
  webhooks: Schema.optional(Schema.Boolean).annotate({ description: "May subscribe itself to events; default false" }),
  expires: Schema.optional(Schema.Literals(EXPIRY_CHOICES)).annotate({ description: "Default never" })
}).annotate({ identifier: "CreateApiKey" })

export const CreatedKey = Schema.Struct({
  id: Schema.String,
  key: Schema.String.annotate({ description: "The key (mk_...): shown this once, never again" }),
  name: Schema.String,
  companyId: Schema.String,
  scopes: Schema.Array(Schema.String),
  webhooks: Schema.Boolean,
  createdAt: Timestamp,
  expiresAt: Schema.NullOr(Timestamp)
}).annotate({ identifier: "CreatedApiKey" })

export const CreatePortalLink = Schema.Struct({
  expiresIn: Schema.optional(Schema.Union([Schema.Number, Schema.String])).annotate({
    description:
      "How long the link and its session last: seconds, or a duration (15m, 1h, 24h); at most 24 hours, default 1 hour"
  }),
  branding: Schema.optional(
    Schema.Struct({
      name: Schema.optional(Schema.String).annotate({ description: "Shown instead of the company's name" }),
      colour: Schema.optional(Schema.String).annotate({ description: "#rrggbb, the portal's bar" })
    })
  )
}).annotate({ identifier: "CreatePortalLink" })

export const PortalLink = Schema.Struct({
  id: Schema.String,
  keyId: Schema.String,
  keyName: Schema.String,
  url: Schema.String.annotate({
    description: "The link to give the integrator (/portal/<one-time token>): shown this once, works once"
  }),
  path: Schema.String,
  expiresAt: Timestamp
}).annotate({ identifier: "PortalLink" })

export const TokenInfo = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  prefix: Schema.String,
  userEmail: Schema.String,
  state: State,
  createdAt: Timestamp,
  expiresAt: Schema.NullOr(Timestamp),
  revokedAt: Schema.NullOr(Timestamp),
  lastUsedAt: Schema.NullOr(Timestamp)
}).annotate({ identifier: "AdminTokenInfo" })

export const Whoami = Schema.Struct({
  company: Schema.Struct({ id: Schema.String, name: Schema.String, host: Schema.String }),
  admin: Schema.Struct({ id: Schema.String, email: Schema.String, name: Schema.String })
}).annotate({ identifier: "AdminWhoami" })

const IdParam = { id: Schema.String }

export class AdminRootGroup extends HttpApiGroup.make("admin").add(
  HttpApiEndpoint.get("whoami", ADMIN_PREFIX, { success: Whoami, error: NotFound })
) {}

export class KeysGroup extends HttpApiGroup.make("keys")
  .add(
    HttpApiEndpoint.get("list", `${ADMIN_PREFIX}/keys`, { success: Schema.Struct({ data: Schema.Array(KeyInfo) }) }),
    HttpApiEndpoint.post("create", `${ADMIN_PREFIX}/keys`, {
      payload: CreateKey,
      success: CreatedKey.pipe(HttpApiSchema.status(201)),
      error: [Conflict]
    }),
    HttpApiEndpoint.get("get", `${ADMIN_PREFIX}/keys/:id`, { params: IdParam, success: KeyInfo, error: NotFound }),
    HttpApiEndpoint.post("revoke", `${ADMIN_PREFIX}/keys/:id/revoke`, {
      params: IdParam,
      success: KeyInfo,
      error: [NotFound, Conflict]
    }).annotate(OpenApi.Description, "The key's next request gets 401; its webhook subscriptions are deleted."),
    HttpApiEndpoint.post("portalLink", `${ADMIN_PREFIX}/keys/:id/portal-links`, {
      params: IdParam,
      payload: CreatePortalLink,
      success: PortalLink.pipe(HttpApiSchema.status(201)),
      error: [NotFound, Conflict]
    }).annotate(
      OpenApi.Description,
      "A link that signs its holder into a page of this key alone (its subscriptions, deliveries, Send Again, recovery, test events) until it expires or the key is revoked. The key must be active and have the webhooks permission."
    )
  )
  .annotateMerge(OpenApi.annotations({ description: "API keys of the admin's company" })) {}

export class TokensGroup extends HttpApiGroup.make("tokens")
  .add(
    HttpApiEndpoint.get("list", `${ADMIN_PREFIX}/tokens`, {
      success: Schema.Struct({ data: Schema.Array(TokenInfo) })
    }),
    HttpApiEndpoint.post("revoke", `${ADMIN_PREFIX}/tokens/:id/revoke`, {
      params: IdParam,
      success: TokenInfo,
      error: [NotFound, Conflict]
    })
  )
  .annotateMerge(OpenApi.annotations({ description: "Admin tokens of the admin's company (issued by the CLI)" })) {}

export class AdminApi extends HttpApi.make("admin")
  .add(AdminRootGroup, KeysGroup, TokensGroup)
  .add(WebhooksGroup) // endpoints, subscriptions, deliveries, activity (webhooks.ts)
  .add(ReplaysGroup) // replays: dry run, progress, cancel (replays.ts)
  .middleware(AdminRequestErrors)
  .middleware(AdminAuth)
  .annotate(HttpApi.QueryParseOptions, { onExcessProperty: "error", errors: "first" })
  // A field a body does not take is refused (400), never silently dropped, in every group.
  .annotate(HttpApi.PayloadParseOptions, { onExcessProperty: "error", errors: "first" })
  .annotateMerge(
    OpenApi.annotations({
      title: "Safety Records Service: admin API",
      version: "1",
      description:
        'Manage API keys, webhook endpoints, deliveries, subscriptions and activity as an admin, with an admin token from `npm run admin -- tokens create --as <e-mail>`. Errors are JSON {"error": "..."}.'
    })
  ) {}
