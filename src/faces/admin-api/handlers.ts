// Handlers of the admin HTTP API: thin wrappers over the admin operations.
import { Effect, Layer, Redacted } from "effect"
import { HttpEffect, HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder, HttpApiMiddleware } from "effect/http-api"
import { authenticationServices, clientOf, strayParameter } from "../api/auth.ts"
import { invalid, unauthorized } from "../../domain/errors.ts"
import { Sql } from "../../platform/db/Sql.ts"
import { companyById } from "../../access/identity.ts"
import { createKey, getKey, listKeys, parseScopes, revokeKey } from "../../access/keys/store.ts"
import { authenticateToken, listTokens, needsLookup, revokeToken, tooManyTokenFailures } from "../../access/tokens.ts"
import { createPortalLink } from "../../access/portal.ts"
import { TrustProxySetting } from "../../platform/config.ts"
import { originOf } from "../http/origin.ts"
import { AdminApi, AdminAuth, AdminRequestErrors, byAdmin, CurrentAdmin } from "./definition.ts"

/** What a 401 of the admin API carries besides its body. */
const CHALLENGE = { "www-authenticate": 'Bearer realm="admin"' }

export const AdminAuthLive = Layer.effect(
  AdminAuth,
  Effect.gen(function* () {
    const sql = yield* Sql
    const { keys, trust, settings } = yield* authenticationServices
    const { authFailuresPerMinute } = settings
    return AdminAuth.of({
      adminToken: (httpEffect, { credential, endpoint }) =>
        Effect.gen(function* () {
          // Made-up tokens cost a lookup each: they take from the client's failed authentications
          // as unknown API keys do (docs/api.md#unknown-keys-from-one-address).
          const token = Redacted.value(credential)
          const authenticate = authenticateToken(token).pipe(Effect.provideService(Sql, sql), Effect.orDie)
          const guarded = needsLookup(token)
            ? yield* keys.guard(
                clientOf(yield* HttpServerRequest.HttpServerRequest, trust),
                token,
                authenticate,
                (check) => !("refused" in check)
              )
            : { checked: yield* authenticate }
          if ("retryAfter" in guarded) {
            yield* HttpEffect.appendPreResponseHandler((_request, response) =>
              Effect.succeed(HttpServerResponse.setHeaders(response, { "retry-after": String(guarded.retryAfter) }))
            )
            return yield* guarded.error ?? tooManyTokenFailures(authFailuresPerMinute, guarded.retryAfter)
          }
          const check = guarded.checked
          if ("refused" in check) {
            yield* HttpEffect.appendPreResponseHandler((_request, response) =>
              Effect.succeed(HttpServerResponse.setHeaders(response, CHALLENGE))
            )
            return yield* unauthorized(check.refused)
          }
          // Paths that declare their parameters refuse others by their schema; the rest take
          // none, and one given is refused rather than silently ignored (?key=... filters nothing).
          if (endpoint.query === undefined) {
            const stray = strayParameter((yield* HttpServerRequest.HttpServerRequest).url)
            if (stray !== undefined) return yield* invalid(`unknown query parameter "${stray}"; this path takes none`)
          }
          return yield* Effect.provideService(httpEffect, CurrentAdmin, check.actor)
        })
    })
  })
)

/** A schema issue on one line ("Expected no excess property at ["companyId"]"). */
const oneLine = (message: string) => message.replace(/\s*\n\s*/g, " ")

export const AdminRequestErrorsLive = HttpApiMiddleware.layerSchemaErrorTransform(AdminRequestErrors, (error) => {
  switch (error.kind) {
    case "Query":
    case "Params":
    case "Headers":
      return Effect.fail(invalid(`invalid ${error.kind.toLowerCase()}: ${oneLine(error.cause.message)}`))
    case "Payload":
      return Effect.fail(invalid(`invalid request body: ${oneLine(error.cause.message)}`))
    default:
      return Effect.fail(error)
  }
})

export const AdminRootHandlers = HttpApiBuilder.group(AdminApi, "admin", (handlers) =>
  handlers.handle("whoami", () =>
    Effect.gen(function* () {
      const admin = yield* CurrentAdmin
      const company = yield* companyById(admin.companyId)
      return { company, admin: { id: admin.userId, email: admin.email, name: admin.name } }
    })
  )
)

export const KeysHandlers = HttpApiBuilder.group(AdminApi, "keys", (handlers) =>
  handlers
    .handle("list", () => byAdmin((admin) => Effect.map(listKeys(admin.companyId), (data) => ({ data }))))
    .handle("create", ({ payload }) =>
      Effect.gen(function* () {
        const admin = yield* CurrentAdmin
        const parsed = parseScopes(payload.read === "all" ? ["all"] : payload.read)
        if ("error" in parsed) return yield* parsed.error
        return yield* createKey(admin, {
          companyId: admin.companyId,
          name: payload.name,
          scopes: parsed.scopes,
          webhooks: payload.webhooks ?? false,
          expires: payload.expires ?? "never"
        })
      })
    )
    .handle("get", ({ params }) => byAdmin((admin) => getKey(admin.companyId, params.id)))
    .handle("revoke", ({ params }) => byAdmin((admin) => revokeKey(admin, params.id)))
    .handle("portalLink", ({ params, payload }) =>
      Effect.gen(function* () {
        const request = yield* HttpServerRequest.HttpServerRequest
        const origin = originOf(request, yield* TrustProxySetting)
        const link = yield* byAdmin((admin) =>
          createPortalLink(admin, params.id, { expiresIn: payload.expiresIn, branding: payload.branding })
        )
        return { ...link, url: `${origin}${link.path}` }
      })
    )
)

export const TokensHandlers = HttpApiBuilder.group(AdminApi, "tokens", (handlers) =>
  handlers
    .handle("list", () => byAdmin((admin) => Effect.map(listTokens(admin.companyId), (data) => ({ data }))))
    .handle("revoke", ({ params }) => byAdmin((admin) => revokeToken(admin, params.id)))
)
