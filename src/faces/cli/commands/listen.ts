// listen --forward-to <url>: a receivers' kit, as `stripe listen` is. With an API key it
// follows the events feed (GET /api/v1/events) of a running service and forwards each new
// event to a local URL, signed as a real delivery is (with a local secret it prints), so a
// developer can build a receiver without a public HTTPS address. It talks to the service
// over HTTP only, never to its database.
import { Config, Data, Effect, Option } from "effect"
import { Command, Flag } from "effect/cli"
import { commaList, optionalText } from "../support.ts"
import { newSecret, signedHeaders } from "../../../webhooks/net/signature.ts"
import { isEventKind } from "../../../domain/event-kinds.ts"
import { parseFilterDate, FILTER_DATE_FORMATS } from "../../../domain/dates.ts"
import { at, invalid, words } from "../../../domain/errors.ts"

interface FeedEvent {
  readonly id: string
  readonly event: string
  readonly createdAt: string
  readonly data: unknown
}

interface Options {
  readonly base: string
  readonly key: string
  readonly forwardTo: string
  readonly secret: string
  readonly events: ReadonlySet<string> | null
  readonly intervalMs: number
  readonly json: boolean
}

const PAGE = 200

/** Every event after `after` (ISO, exclusive), oldest first, across pages; or only the newest `only`. */
const newEvents = async (o: Options, after: string | undefined, only?: number): Promise<FeedEvent[]> => {
  const out: FeedEvent[] = []
  let cursor: string | null = null
  do {
    const q = new URLSearchParams({ limit: String(only ?? PAGE) })
    if (after !== undefined) q.set("createdAfter", after)
    if (cursor !== null) q.set("cursor", cursor)
    const res = await fetch(`${o.base}/api/v1/events?${q}`, {
      headers: { authorization: `Bearer ${o.key}` },
      signal: AbortSignal.timeout(10_000)
    })
    if (res.status === 429) {
      await new Promise((r) => setTimeout(r, Number(res.headers.get("retry-after") ?? "5") * 1000))
      continue
    }
    const body = (await res.json().catch(() => ({}))) as {
      data?: FeedEvent[]
      nextCursor?: string | null
      error?: string
    }
    if (!res.ok)
      throw new ListenRefused({
        message: `the service answered ${res.status} to GET /api/v1/events: ${body.error ?? "no reason given"}`
      })
    out.push(...(body.data ?? []))
    cursor = only === undefined ? (body.nextCursor ?? null) : null
  } while (cursor !== null)
  return out.reverse() // the feed is newest first
}

/** The service answered the feed with an error: listen stops and says what it answered. */
class ListenRefused extends Data.TaggedError("ListenRefused")<{ readonly message: string }> {}

/** One millisecond before `iso`: the feed's createdAfter is exclusive, and commits can share a millisecond. */
const justBefore = (iso: string) => new Date(Date.parse(iso) - 1).toISOString()

const forward = async (o: Options, e: FeedEvent): Promise<string> => {
  const body = JSON.stringify({ id: e.id, event: e.event, createdAt: e.createdAt, data: e.data })
  try {
    const res = await fetch(o.forwardTo, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "user-agent": "Service-Webhooks/1",
        "service-event": e.event,
        ...signedHeaders(o.secret, e.id, Math.floor(Date.now() / 1000), body)
      },
      body,
      redirect: "manual",
      signal: AbortSignal.timeout(10_000)
    })
    await res.arrayBuffer().catch(() => {})
    return String(res.status)
  } catch (err) {
    return `error: ${err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err)}`
  }
}

const follow = (o: Options, since: string | undefined) =>
  Effect.tryPromise({
    try: async (signal) => {
      // mark: the newest createdAt seen. Each poll asks from one millisecond before it (commits
      // can share a millisecond) and skips the ids already seen there.
      let mark = since
      const seen = new Map<string, string>()
      if (since === undefined) {
        // Only what happens from now on: the newest events so far are marked as seen.
        const newest = (await newEvents(o, undefined, 1))[0]
        if (newest !== undefined) {
          for (const e of await newEvents(o, justBefore(newest.createdAt))) seen.set(e.id, e.createdAt)
          mark = newest.createdAt
        }
      }
      process.stderr.write(
        `Ready. Forwarding events to ${o.forwardTo}\nYour local webhook signing secret is ${o.secret} (verify with it; ^C to stop)\n`
      )
      while (!signal.aborted) {
        for (const e of await newEvents(o, mark === undefined ? undefined : justBefore(mark))) {
          if (seen.has(e.id)) continue
          seen.set(e.id, e.createdAt)
          if (mark === undefined || e.createdAt > mark) mark = e.createdAt
          if (o.events !== null && !o.events.has(e.event)) continue
          const outcome = await forward(o, e)
          process.stdout.write(
            o.json
              ? `${JSON.stringify({ id: e.id, event: e.event, createdAt: e.createdAt, status: outcome })}\n`
              : `${e.createdAt}  ${e.event.padEnd(26)} ${e.id}  -> ${outcome}\n`
          )
        }
        // Only ids inside the overlap millisecond can come again.
        for (const [id, at] of seen) if (mark !== undefined && at < justBefore(mark)) seen.delete(id)
        await new Promise((r) => setTimeout(r, o.intervalMs))
      }
    },
    catch: (e) =>
      e instanceof ListenRefused
        ? invalid(e.message)
        : invalid(`listen stopped: ${e instanceof Error ? e.message : String(e)}`)
  })

export const listen = Command.make(
  "listen",
  {
    forwardTo: Flag.String("forward-to").pipe(
      Flag.withDescription("The local URL to POST each event to, e.g. http://localhost:4000/hooks")
    ),
    apiKey: Flag.String("api-key").pipe(
      Flag.withDescription("An API key (mk_...) that may read the events' record kinds (default: SERVICE_API_KEY)"),
      Flag.withFallbackConfig(Config.String("SERVICE_API_KEY")),
      Flag.optional
    ),
    url: optionalText("url", "The service's address (default: http://127.0.0.1:$PORT, PORT 3000)"),
    events: optionalText("events", "Only these events, separated by commas (default: all the key may read)"),
    since: optionalText(
      "since",
      `Forward events from this moment on too: ${FILTER_DATE_FORMATS} (default: only new ones)`
    ),
    secret: optionalText("secret", "Sign with this whsec_... secret (default: a new one, printed)"),
    interval: Flag.Int("interval").pipe(
      Flag.withDescription("Seconds between polls of the feed (default 1)"),
      Flag.withDefault(1)
    ),
    json: Flag.Boolean("json").pipe(
      Flag.withDescription("One JSON line per forwarded event on stdout"),
      Flag.withDefault(false)
    )
  },
  (args) =>
    Effect.gen(function* () {
      const key = Option.getOrElse(args.apiKey, () => process.env.SERVICE_API_KEY ?? "")
      if (key === "")
        return yield* Effect.fail(invalid(words`an API key is needed: ${at("apiKey")} mk_... or SERVICE_API_KEY`))
      let forwardTo: URL
      try {
        forwardTo = new URL(args.forwardTo)
      } catch {
        return yield* Effect.fail(
          invalid(words`${at("forwardTo")} must be an http:// or https:// URL, not "${args.forwardTo}"`)
        )
      }
      if (forwardTo.protocol !== "http:" && forwardTo.protocol !== "https:") {
        return yield* Effect.fail(
          invalid(words`${at("forwardTo")} must be an http:// or https:// URL, not "${args.forwardTo}"`)
        )
      }
      const events = Option.isSome(args.events) ? commaList(args.events.value) : null
      const unknown = events?.filter((e) => !isEventKind(e)) ?? []
      if (unknown.length > 0)
        return yield* Effect.fail(invalid(`unknown event ${unknown.join(", ")}`, { field: "events" }))
      const since = Option.isSome(args.since) ? parseFilterDate(args.since.value) : undefined
      if (Option.isSome(args.since) && since === undefined)
        return yield* Effect.fail(
          invalid(words`${at("since")} must be ${FILTER_DATE_FORMATS}, not "${args.since.value}"`)
        )
      const secret = Option.getOrElse(args.secret, newSecret)
      if (!/^whsec_[A-Za-z0-9+/]+={0,2}$/.test(secret))
        return yield* Effect.fail(invalid(words`${at("secret")} must be whsec_ followed by base64`))
      if (args.interval < 1 || args.interval > 60)
        return yield* Effect.fail(invalid(words`${at("interval")} must be from 1 to 60 seconds`))
      const base = Option.getOrElse(args.url, () => `http://127.0.0.1:${process.env.PORT ?? "3000"}`).replace(
        /\/+$/,
        ""
      )
      yield* follow(
        {
          base,
          key,
          forwardTo: forwardTo.toString(),
          secret,
          events: events === null ? null : new Set(events),
          intervalMs: args.interval * 1000,
          json: args.json
        },
        since?.iso
      )
    })
).pipe(
  Command.withDescription(
    "Forward the events feed to a local URL, signed like real deliveries, to build a receiver locally"
  )
)
