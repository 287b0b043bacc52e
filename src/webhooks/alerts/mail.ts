// Alert mails (docs/events.md#alerts-by-e-mail): the rows raise.ts queued, sent over SMTP with
// nodemailer, beside the delivery engine and never in its way. At most `perHour` mails a
// company an hour; what the limit holds back waits and goes as one summary once the hour
// allows another mail. A mail server that is down or refuses delays the mail (retried with a
// growing wait), never drops it. Several processes may run it: a row is sent by whoever locks it.
import { Cause, Effect, Layer, Option, Queue, Redacted } from "effect"
import nodemailer from "nodemailer"
import type { Sql as Pg } from "postgres"
import { Sql } from "../../platform/db/Sql.ts"
import { AlertMailConfig } from "../../platform/config.ts"
import { StartRefused } from "../../platform/db/refusal.ts"
import { listenScoped } from "../../platform/db/channels.ts"
import { currentSupervisor } from "../../platform/supervisor.ts"
import { MAIL_CHANNEL } from "./raise.ts"
import { summaryMail } from "./mail-text.ts"

export const MAILS_PER_HOUR = 20

/** What sends one mail (nodemailer's transport; tests may give another). */
export type SendMail = (mail: {
  readonly from: string
  readonly to: ReadonlyArray<string>
  readonly subject: string
  readonly text: string
}) => Promise<unknown>

export type MailerOptions = {
  readonly send: SendMail
  readonly from: string
  readonly perHour?: number | undefined
  /** With nothing due: how often to look anyway (a notification wakes it at once). */
  readonly pollMs?: number | undefined
  /** The first wait after a failed send (it doubles, up to an hour). */
  readonly retryMs?: number | undefined
}

type MailRow = {
  id: string
  company_id: string
  recipients: string[]
  subject: string
  body: string
  attempts: number
  held_back: boolean
}

/** The wait after a failed send: 30 s, doubling, at most an hour. */
const retryAfterMs = (base: number, attempts: number) => Math.min(3_600_000, base * 2 ** Math.min(attempts, 7))

/** One pass over a company's due mails, in its transaction (the rows locked). */
const sendCompany = async (sql: Pg, o: Required<MailerOptions>, company: string, errors: Array<string>) =>
  sql.begin(async (tx) => {
    // One sender a company at a time, across processes: the hourly count it reads stays true
    // while it sends (another sender finds the company taken and leaves it).
    const [lock] = await tx.unsafe<{ ok: boolean }[]>(
      `select pg_try_advisory_xact_lock(hashtextextended('service.alert_mails:' || $1, 0)) as ok`,
      [company]
    )
    if (!lock!.ok) return
    const rows = await tx.unsafe<MailRow[]>(
      // By the id's number (a bare \`id\` here would be the text column selected: 10 before 2).
      `select m.id::text, company_id::text, recipients, subject, body, attempts, held_back from service.alert_mails m
       where company_id = $1 and state = 'pending' and next_attempt_at <= now() and event_id is not null
       order by m.id for update skip locked`,
      [company]
    )
    if (rows.length === 0) return
    const [w] = await tx.unsafe<{ sent: number; frees: Date | null }[]>(
      `select count(*)::int as sent, min(sent_at) + interval '1 hour' as frees from service.alert_mails
       where company_id = $1 and state = 'sent' and sent_at > now() - interval '1 hour'`,
      [company]
    )
    let room = o.perHour - w!.sent
    const fail = async (ids: ReadonlyArray<string>, attempts: number, error: string) => {
      errors.push(error)
      return tx.unsafe(
        `update service.alert_mails set attempts = attempts + 1, last_error = $2,
           next_attempt_at = now() + $3 * interval '1 millisecond' where id = any($1::bigint[])`,
        [ids, error.slice(0, 500), retryAfterMs(o.retryMs, attempts)]
      )
    }
    const tryOne = async (to: ReadonlyArray<string>, subject: string, text: string): Promise<string | null> => {
      try {
        await o.send({ from: o.from, to, subject, text })
        return null
      } catch (e) {
        return (e as Error).message || String(e)
      }
    }
    // Held back before: everything pending goes as one summary per recipient list.
    if (rows.some((r) => r.held_back)) {
      if (room <= 0) return
      const groups = new Map<string, Array<MailRow>>()
      for (const r of rows) groups.set(r.recipients.join(","), [...(groups.get(r.recipients.join(",")) ?? []), r])
      for (const group of groups.values()) {
        if (room <= 0) break
        const text = summaryMail(
          group.map((r) => r.subject),
          o.perHour
        )
        const error = await tryOne(group[0]!.recipients, text.subject, text.body)
        if (error !== null) {
          await fail(
            group.map((r) => r.id),
            Math.max(...group.map((r) => r.attempts)),
            error
          )
          continue
        }
        room--
        const [s] = await tx.unsafe<{ id: string }[]>(
          `insert into service.alert_mails (company_id, recipients, subject, body, state, sent_at)
           values ($1, $2, $3, $4, 'sent', now()) returning id::text`,
          [company, group[0]!.recipients, text.subject, text.body]
        )
        await tx.unsafe(
          `update service.alert_mails set state = 'summarized', summary_id = $2, sent_at = now() where id = any($1::bigint[])`,
          [group.map((r) => r.id), s!.id]
        )
      }
      return
    }
    for (const r of rows) {
      if (room <= 0) {
        // Over the limit: the rest wait for the hour, then go together as a summary.
        await tx.unsafe(
          `update service.alert_mails set held_back = true, next_attempt_at = greatest(next_attempt_at, $2)
           where id = any($1::bigint[])`,
          [
            rows.filter((x) => Number(x.id) >= Number(r.id)).map((x) => x.id),
            w!.frees ?? new Date(Date.now() + 3_600_000)
          ]
        )
        return
      }
      const error = await tryOne(r.recipients, r.subject, r.body)
      if (error !== null) {
        await fail([r.id], r.attempts, error)
        continue
      }
      room--
      await tx.unsafe(
        `update service.alert_mails set state = 'sent', sent_at = now(), last_error = null where id = $1`,
        [r.id]
      )
    }
  })

/** Every company with a mail due, once; the errors of the sends that failed (they wait and are tried again). */
export const sendDueMails = async (sql: Pg, options: MailerOptions): Promise<ReadonlyArray<string>> => {
  const o = { perHour: MAILS_PER_HOUR, pollMs: 5_000, retryMs: 30_000, ...options } as Required<MailerOptions>
  const companies = await sql<{ company_id: string }[]>`
    select distinct company_id::text from service.alert_mails where state = 'pending' and next_attempt_at <= now()`
  const errors: Array<string> = []
  for (const c of companies) await sendCompany(sql, o, c.company_id, errors)
  return errors
}

/** Runs the mailer under the supervisor until it stops. */
export const makeMailer = (options: MailerOptions) =>
  Effect.gen(function* () {
    const sql = yield* Sql
    const wakeQ = yield* Queue.sliding<void>(1)
    const poke = () => void Queue.offerUnsafe(wakeQ, undefined)
    const supervisor = yield* currentSupervisor
    yield* supervisor.hold(listenScoped(sql.pool, "alert mails: ", [[MAIL_CHANNEL, poke]]))
    const step = Effect.tryPromise(() => sendDueMails(sql.pool, options)).pipe(
      Effect.flatMap((errors) =>
        errors.length === 0
          ? Effect.void
          : Effect.logWarning("alert mails could not be sent; retrying", {
              failed: errors.length,
              error: errors.at(-1)
            })
      ),
      Effect.catchCause((cause) => Effect.logWarning("alert mails could not be sent; retrying", Cause.pretty(cause)))
    )
    const loop = Effect.forever(
      Effect.gen(function* () {
        yield* step
        yield* Queue.take(wakeQ).pipe(Effect.timeoutOption(options.pollMs ?? 5_000), Effect.asVoid)
      })
    )
    yield* supervisor.run("alert mails", loop)
  })

/** The mail settings, checked (a bad one refuses the start): null when SMTP_URL is unset (no mail). */
export const loadMailSettings = Effect.gen(function* () {
  const c = yield* AlertMailConfig
  if (Option.isNone(c.url) || Redacted.value(c.url.value).trim() === "") return null
  const url = Redacted.value(c.url.value).trim()
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return yield* new StartRefused({
      message: "SMTP_URL is not a URL: give smtp://user:password@host:port or smtps://..."
    })
  }
  if (parsed.protocol !== "smtp:" && parsed.protocol !== "smtps:")
    return yield* new StartRefused({
      message: `SMTP_URL must start with smtp:// or smtps://, not ${parsed.protocol}//`
    })
  const from = Option.getOrElse(c.from, () => "").trim()
  if (!/^[^\s@<>]+@[^\s@<>]+$/.test(from) && !/<[^\s@<>]+@[^\s@<>]+>$/.test(from))
    return yield* new StartRefused({
      message: "ALERT_FROM must be the sender's address (alerts@example.com) when SMTP_URL is set"
    })
  return { url, from, host: parsed.hostname }
})

/** nodemailer over SMTP_URL, with deadlines so a server that hangs holds nothing long. */
export const smtpSender = (url: string): SendMail => {
  const transport = nodemailer.createTransport({
    url,
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 20_000
  })
  return (mail) => transport.sendMail({ from: mail.from, to: [...mail.to], subject: mail.subject, text: mail.text })
}

/** The mailer of the delivery role: off (said once) when SMTP_URL is unset. */
export const MailerLive = Layer.effectDiscard(
  Effect.gen(function* () {
    const settings = yield* loadMailSettings
    if (settings === null) return yield* Effect.logInfo("alert mails are off: SMTP_URL is not set")
    yield* Effect.logInfo("alert mails on", { smtpHost: settings.host, from: settings.from })
    yield* makeMailer({ send: smtpSender(settings.url), from: settings.from })
  })
).pipe(Layer.provide(Sql.layer))
