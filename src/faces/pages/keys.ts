// The API keys page: create (name, record kinds, expiry, webhooks permission; the key shown
// once), the list (who made each key, last use, requests) and revoke. The same operations
// as POST /admin/v1/keys and /admin/v1/keys/:id/revoke (src/access/keys/store.ts), with the same
// rules and the same error messages.
import { Effect, Layer } from "effect"
import { HttpRouter } from "effect/http"
import { RESOURCE_INFO, RESOURCES } from "../../domain/resources.ts"
import type { DomainError } from "../../domain/errors.ts"
import { httpMessage, httpStatus } from "../http/errors.ts"
import {
  createKey,
  DEFAULT_EXPIRY,
  EXPIRY_CHOICES,
  listKeys,
  parseExpiry,
  parseScopes,
  revokeKey,
  type CreatedKey,
  type Expiry,
  type KeyInfo
} from "../../access/keys/store.ts"
import { attr, html, type Html } from "./html.ts"
import {
  csrfField,
  formatDate,
  formError,
  htmlResponse,
  page,
  postButton,
  seeOther,
  shownOnce,
  when
} from "./layout.ts"
import { createPortalLink } from "../../access/portal.ts"
import { TrustProxySetting } from "../../platform/config.ts"
import { originOf } from "../http/origin.ts"
import { PATHS, pathFor } from "./paths.ts"
import { signedIn, signedInForm } from "./request.ts"
import { setFlash, type Session } from "../../access/sessions.ts"

export const EXPIRY_LABELS: Readonly<Record<Expiry, string>> = {
  "30d": "30 days",
  "90d": "90 days",
  "1y": "1 year",
  never: "Never"
}

type CreateForm = {
  readonly name: string
  readonly read: ReadonlyArray<string>
  readonly expires: string
  readonly webhooks: boolean
}

const EMPTY_FORM: CreateForm = { name: "", read: [], expires: DEFAULT_EXPIRY, webhooks: false }

const createForm = (
  session: Session,
  form: CreateForm,
  error: string | undefined
): Html => html`<form method="post" action="${PATHS.keys}" class="card" id="create-key" aria-labelledby="create-key-title">
  ${csrfField(session)}
  <h2 id="create-key-title">Create a key</h2>
  ${formError("create-key-error", error)}
  <label for="key-name">Name</label>
  <input type="text" id="key-name" name="name" maxlength="100" required value="${form.name}" aria-describedby="key-name-hint">
  <p class="hint" id="key-name-hint">After what will use it, e.g. "Power BI export".</p>
  <fieldset id="key-read">
    <legend>Record kinds it may read</legend>
    <div class="choices">
      ${RESOURCES.map(
        (r) =>
          html`<label for="read-${r}"><input type="checkbox" id="read-${r}" name="read" value="${r}"${attr("checked", form.read.includes(r))}> <span>${RESOURCE_INFO[r].description} <code class="muted">${r}</code></span></label>`
      )}
    </div>
    <button type="button" class="link" data-check-all="key-read" hidden>Tick all / none</button>
  </fieldset>
  <fieldset>
    <legend>Expires</legend>
    <div class="choices">
      ${EXPIRY_CHOICES.map(
        (e) =>
          html`<label for="expires-${e}"><input type="radio" id="expires-${e}" name="expires" value="${e}"${attr("checked", form.expires === e)}> ${e === "never" ? "Never" : `After ${EXPIRY_LABELS[e]}`}</label>`
      )}
    </div>
  </fieldset>
  <label class="check" for="key-webhooks"><input type="checkbox" id="key-webhooks" name="webhooks" value="on"${attr("checked", form.webhooks)}> <span>Webhooks permission: the key may subscribe itself to events of what it can read (POST /api/v1/hooks)</span></label>
  <div class="actions"><button type="submit" class="primary">Create key</button></div>
</form>`

const stateBadge = (state: string): Html => html`<span class="state ${state}">${state}</span>`

/** The portal link's lives offered (the admin API takes any up to 24 hours). */
export const PORTAL_LIFE_CHOICES = [
  ["15m", "15 minutes"],
  ["1h", "1 hour"],
  ["4h", "4 hours"],
  ["8h", "8 hours"],
  ["24h", "24 hours"]
] as const

/** A portal link for a key's integrator: how long, and optional branding. */
const portalLinkForm = (session: Session, k: KeyInfo): Html => html`<details class="portal-link">
  <summary>Portal link…</summary>
  <form method="post" action="${pathFor(PATHS.keyPortalLink, k.id)}" aria-label="Make a portal link for ${k.name}">
    ${csrfField(session)}
    <p class="hint">A link that opens a page of this key's subscriptions and deliveries, without an admin account. It works once, and ends when it expires or the key is revoked.</p>
    <label for="portal-expires-${k.id}">Lasts</label>
    <select id="portal-expires-${k.id}" name="expiresIn">${PORTAL_LIFE_CHOICES.map(
      ([v, label]) => html`<option value="${v}"${attr("selected", v === "1h")}>${label}</option>`
    )}</select>
    <label for="portal-name-${k.id}">Name shown <span class="muted">(optional)</span></label>
    <input type="text" id="portal-name-${k.id}" name="brandName" maxlength="100" aria-describedby="portal-name-hint-${k.id}">
    <p class="hint" id="portal-name-hint-${k.id}">Instead of your company's name.</p>
    <label for="portal-colour-${k.id}">Colour <span class="muted">(optional, #rrggbb)</span></label>
    <input type="text" id="portal-colour-${k.id}" name="brandColour" maxlength="7" placeholder="#0b4f8a" spellcheck="false" autocomplete="off">
    <div class="actions"><button type="submit" class="primary">Make portal link</button></div>
  </form>
</details>`

const keysTable = (session: Session, keys: ReadonlyArray<KeyInfo>): Html =>
  keys.length === 0
    ? html`<p class="muted">No keys yet.</p>`
    : html`<table class="stack">
  <caption class="muted">${keys.filter((k) => k.state === "active").length} active of at most 20</caption>
  <thead><tr><th scope="col">Name</th><th scope="col">Reads</th><th scope="col">State</th><th scope="col">Made by</th><th scope="col">Expires</th><th scope="col">Last used</th><th scope="col">Requests</th><th scope="col"><span class="muted">Actions</span></th></tr></thead>
  <tbody>
  ${keys.map(
    (k) => html`<tr data-key-id="${k.id}">
    <td data-label="Name"><strong>${k.name}</strong><br><code class="muted">${k.id}</code></td>
    <td data-label="Reads">${k.scopes.length === RESOURCES.length ? "all record kinds" : k.scopes.join(", ")}${k.webhooks ? html`<br><span class="muted">+ webhooks</span>` : ""}</td>
    <td data-label="State">${stateBadge(k.state)}${k.revokedAt !== null ? html`<br><span class="muted">by ${k.revokedBy ?? "?"}, ${when(k.revokedAt)}</span>` : ""}</td>
    <td data-label="Made by">${k.createdBy ?? html`<span class="muted">unknown</span>`}<br><span class="muted">${when(k.createdAt)}</span></td>
    <td data-label="Expires">${when(k.expiresAt)}</td>
    <td data-label="Last used">${when(k.lastUsedAt)}</td>
    <td data-label="Requests" class="num">${k.requestCount.toLocaleString("en")}</td>
    <td data-label="Actions">${k.state === "active" && k.webhooks ? portalLinkForm(session, k) : ""}${
      k.state === "active"
        ? postButton(session, pathFor(PATHS.keyRevoke, k.id), "Revoke", {
            style: "danger",
            accessibleLabel: `Revoke ${k.name}`,
            confirm: `Revoke the key "${k.name}"? Its next request gets 401, its webhook subscriptions are deleted and its portal links stop working. This cannot be undone.`
          })
        : ""
    }</td>
  </tr>`
  )}
  </tbody>
</table>`

const keysPage = (
  session: Session,
  keys: ReadonlyArray<KeyInfo>,
  options: {
    readonly form?: CreateForm
    readonly error?: string
    readonly created?: CreatedKey
    readonly portalLink?: { readonly url: string; readonly keyName: string; readonly expiresAt: string }
  } = {}
): Html =>
  page({
    title: "API keys",
    section: "keys",
    session,
    content: html`${
      options.created !== undefined
        ? html`${shownOnce({
            id: "new-key",
            label: `Key "${options.created.name}" created`,
            secret: options.created.key,
            warning:
              "This is the only time the key is shown: only a fingerprint of it is kept. If it is lost, revoke it and make another."
          })}`
        : ""
    }${
      options.portalLink !== undefined
        ? shownOnce({
            id: "portal-link",
            label: `Portal link for "${options.portalLink.keyName}"`,
            secret: options.portalLink.url,
            warning: `Send it to the key's integrator. It works once, until ${formatDate(options.portalLink.expiresAt)}, or until the key is revoked; only a hash of it is kept.`
          })
        : ""
    }
<p>Keys let integrations read records through the API (<code>Authorization: Bearer mk_…</code>). A key reads only the record kinds ticked for it.</p>
<h2>Keys</h2>
${keysTable(session, keys)}
${createForm(session, options.form ?? EMPTY_FORM, options.error)}`
  })

export const KeysRoutes = Layer.mergeAll(
  HttpRouter.add(
    "GET",
    PATHS.keys,
    signedIn((session) =>
      Effect.map(listKeys(session.actor.companyId).pipe(Effect.orDie), (keys) => htmlResponse(keysPage(session, keys)))
    )
  ),
  HttpRouter.add(
    "POST",
    PATHS.keys,
    signedInForm((session, body) =>
      Effect.gen(function* () {
        const form: CreateForm = {
          name: body.get("name") ?? "",
          read: body.getAll("read"),
          expires: body.get("expires") ?? DEFAULT_EXPIRY,
          webhooks: body.get("webhooks") === "on"
        }
        const refuse = (status: number, error: string) =>
          Effect.map(listKeys(session.actor.companyId).pipe(Effect.orDie), (keys) =>
            htmlResponse(keysPage(session, keys, { form, error }), { status })
          )
        // As the admin API answers (faces/http/errors.ts).
        const refuseWith = (e: DomainError) => refuse(httpStatus(e), httpMessage(e))
        const expires = parseExpiry(form.expires)
        if (expires === undefined) return yield* refuse(400, `expires must be one of ${EXPIRY_CHOICES.join(", ")}`)
        const parsed = parseScopes(form.read)
        if ("error" in parsed) return yield* refuseWith(parsed.error)
        const created = yield* Effect.result(
          createKey(session.actor, {
            companyId: session.actor.companyId,
            name: form.name,
            scopes: parsed.scopes,
            webhooks: form.webhooks,
            expires
          })
        )
        if (created._tag === "Failure") return yield* refuseWith(created.failure)
        const keys = yield* listKeys(session.actor.companyId).pipe(Effect.orDie)
        return htmlResponse(keysPage(session, keys, { created: created.success }))
      })
    )
  ),
  HttpRouter.add(
    "POST",
    PATHS.keyPortalLink,
    signedInForm((session, form, params, request) =>
      Effect.gen(function* () {
        const made = yield* Effect.result(
          createPortalLink(session.actor, params["id"] ?? "", {
            expiresIn: form.get("expiresIn") ?? undefined,
            branding: { name: form.get("brandName") ?? undefined, colour: form.get("brandColour") ?? undefined }
          })
        )
        if (made._tag === "Failure") {
          yield* setFlash(session, { kind: "error", message: httpMessage(made.failure) })
          return seeOther(PATHS.keys)
        }
        const origin = originOf(request, yield* TrustProxySetting)
        const keys = yield* listKeys(session.actor.companyId).pipe(Effect.orDie)
        return htmlResponse(
          keysPage(session, keys, {
            portalLink: {
              url: `${origin}${made.success.path}`,
              keyName: made.success.keyName,
              expiresAt: made.success.expiresAt
            }
          })
        )
      })
    )
  ),
  HttpRouter.add(
    "POST",
    PATHS.keyRevoke,
    signedInForm((session, _form, params) =>
      Effect.gen(function* () {
        const id = params["id"] ?? ""
        const revoked = yield* Effect.result(revokeKey(session.actor, id))
        yield* setFlash(
          session,
          revoked._tag === "Success"
            ? {
                kind: "success",
                message: `Key "${revoked.success.name}" revoked: its next request gets 401, its webhook subscriptions were deleted and its portal links stopped working.`
              }
            : { kind: "error", message: httpMessage(revoked.failure) }
        )
        return seeOther(PATHS.keys)
      })
    )
  )
)
