// Sessions of the admin pages (sql/005_admin_sessions.sql). Signing in checks the admin
// token with the admin API's own check (tokens.ts: active, not expired, user still an
// admin) and opens a server-side session; the browser gets a random session id in a
// __Host- cookie, never the token. Each request re-checks the session, its token and that
// the user is still an admin, and moves the idle expiry forward.
import { Effect } from "effect"
import { fingerprintOf, isToken, randomToken, sha256 } from "./keys/bearer-secrets.ts"
import { query, type Sql } from "../platform/db/Sql.ts"
import { adminNow, type AdminUser } from "./identity.ts"
import { authenticateToken } from "./tokens.ts"

/** A session ends after this long without a request... */
export const IDLE_HOURS = 12
/** ...and at the latest this long after signing in. */
export const ABSOLUTE_DAYS = 7

/** A message for the next page (Post/Redirect/Get). Never a secret: those are shown on the POST's own answer. */
export type Flash = {
  readonly kind: "success" | "error"
  readonly message: string
  /** The receiver's answer to a test event. */
  readonly ping?: {
    readonly ok: boolean
    readonly status: number | null
    readonly durationMs: number
    readonly error: string | null
    readonly response: string
  }
}

export interface Session {
  readonly idHash: Buffer
  readonly tokenId: string
  readonly actor: AdminUser
  readonly companyName: string
  /** The synchronizer token every form of this session carries. */
  readonly csrf: string
  readonly flash: Flash | null
}

export type Opened = { readonly sessionId: string; readonly actor: AdminUser } | { readonly refused: string }
/** Why there is no live session: it ended (expired, signed out, token revoked or expired), or its user is no longer an admin. */
export type EndedReason = "session" | "role"
export type Resolved = { readonly session: Session } | { readonly ended: EndedReason }

const deleteSession = (idHash: Buffer) =>
  query((sql) => sql`delete from service.admin_sessions where id_hash = ${idHash}`).pipe(Effect.asVoid)

/** Ends the session and says why. */
const ended = (idHash: Buffer, reason: EndedReason): Effect.Effect<Resolved, never, Sql> =>
  Effect.as(deleteSession(idHash), { ended: reason })

/** Opens a session for an admin token, or says why the token is refused (as /admin/v1 would). */
export const openSession = Effect.fn("openSession")(function* (credential: string) {
  const check = yield* authenticateToken(credential.trim())
  if ("refused" in check) return { refused: check.refused } satisfies Opened as Opened
  const sessionId = randomToken()
  const csrf = randomToken()
  const opened = yield* query(async (sql) => {
    const [token] = await sql<
      { id: string }[]
    >`select id::text from service.admin_tokens where fingerprint = ${fingerprintOf(credential.trim())}`
    if (token === undefined) return false
    await sql`delete from service.admin_sessions where expires_at <= now() or absolute_expires_at <= now()`
    await sql`
      insert into service.admin_sessions (id_hash, token_id, company_id, user_id, csrf_secret, expires_at, absolute_expires_at)
      values (${sha256(sessionId)}, ${token.id}, ${check.actor.companyId}, ${check.actor.userId}, ${Buffer.from(csrf, "utf8")},
              now() + ${`${IDLE_HOURS} hours`}::interval, now() + ${`${ABSOLUTE_DAYS} days`}::interval)`
    return true
  })
  if (!opened) return { refused: "unknown admin token" } satisfies Opened as Opened
  return { sessionId, actor: check.actor } satisfies Opened as Opened
})

/**
 * The live session for a cookie's session id, its idle expiry moved forward; or why there is
 * none. A session whose token was revoked or expired, or whose user is no longer an admin,
 * is ended here.
 */
export const resolveSession = Effect.fn("resolveSession")(function* (
  sessionId: string | undefined,
  options: { readonly takeFlash: boolean }
) {
  if (!isToken(sessionId)) return { ended: "session" } satisfies Resolved as Resolved
  const idHash = sha256(sessionId)
  const [row] = yield* query(
    (sql) => sql<
      {
        token_id: string
        user_id: string
        user_email: string
        company_id: string
        csrf_secret: Buffer
        flash: Flash | null
      }[]
    >`
    update service.admin_sessions s
       set last_seen_at = now(), expires_at = least(now() + ${`${IDLE_HOURS} hours`}::interval, s.absolute_expires_at)
      from service.admin_tokens t
     where s.id_hash = ${idHash} and t.id = s.token_id and s.expires_at > now() and s.absolute_expires_at > now()
       and t.revoked_at is null and (t.expires_at is null or t.expires_at > now())
    returning s.token_id::text, t.user_id::text, t.user_email, t.company_id::text, s.csrf_secret, s.flash`
  )
  if (row === undefined) return yield* ended(idHash, "session")
  // Names and the admin role from the app's tables (its own database, perhaps).
  const now = yield* adminNow(row.user_id, row.company_id)
  if (!now.admin) return yield* ended(idHash, "role")
  if (options.takeFlash && row.flash !== null)
    yield* query((sql) => sql`update service.admin_sessions set flash = null where id_hash = ${idHash}`)
  return {
    session: {
      idHash,
      tokenId: row.token_id,
      actor: {
        userId: row.user_id,
        email: row.user_email,
        name: now.userName ?? row.user_email,
        companyId: row.company_id
      },
      companyName: now.companyName ?? "",
      csrf: row.csrf_secret.toString("utf8"),
      flash: row.flash
    }
  } satisfies Resolved as Resolved
})

const withoutNul = (_key: string, value: unknown) =>
  typeof value === "string" ? value.replaceAll("\u0000", "\uFFFD") : value

export const setFlash = (session: Session, flash: Flash) =>
  // jsonb cannot hold a NUL character, and a receiver's answer (a ping's) may carry one.
  query(
    (sql) =>
      sql`update service.admin_sessions set flash = ${JSON.stringify(flash, withoutNul)}::text::jsonb where id_hash = ${session.idHash}`
  ).pipe(Effect.asVoid)

export const endSession = (session: Session) => deleteSession(session.idHash)
