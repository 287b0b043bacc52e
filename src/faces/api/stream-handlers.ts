// Handlers of GET /api/v1/stream and /api/v1/consumers (group in stream-api.ts; reads in
// src/read/stream.ts, consumers in src/read/stream-consumers.ts). An answer is JSON, or with
// Accept: text/event-stream a stream of server-sent events: the same items, each with its offset
// as id, a comment every 15 s so that proxies keep the connection, open until the client goes
// (or the stream cannot go on: event must-refetch or error, then the end).
import { PassThrough } from "node:stream"
import { Effect } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { NodeHttpServerRequest } from "@effect/platform-node"
import type { ServerResponse } from "node:http"
import { type DomainError, invalid, notFound, rateLimited } from "../../domain/errors.ts"
import type { Resource } from "../../domain/resources.ts"
import { CurrentKey, type CurrentKeyShape } from "../../access/keys/current-key.ts"
import {
  ackConsumer,
  checkName,
  consumerSpec,
  deleteConsumer,
  getConsumer,
  listConsumers,
  normalResources,
  noteServed,
  putConsumer
} from "../../read/stream-consumers.ts"
import {
  changeAfter,
  Hangup,
  waitForChanges,
  sharedReads,
  STREAM_DEFAULT_LIMIT,
  StreamFeed,
  type StreamAsk,
  type StreamCore,
  type StreamKey,
  type StreamPage,
  type StreamRead,
  type StreamRefetch
} from "../../read/stream.ts"
import { errorAnswer, httpMessage } from "../http/errors.ts"
import { ServiceApi } from "./definition.ts"
import { etagOf } from "./etag.ts"

/** Seconds between the event stream's heartbeat comments. */
export const HEARTBEAT_MS = 15_000

const keyOf = (key: CurrentKeyShape): StreamKey => ({ keyId: key.keyId, host: key.host, companyId: key.companyId })

const jsonAnswer = (body: string, status = 200) =>
  HttpServerResponse.text(body, { status, contentType: "application/json" })

const pageBody = (r: StreamPage) => `{"data":[${r.items}],"nextOffset":"${r.nextOffset}"}`

const refetchBody = (r: StreamRefetch) => JSON.stringify({ error: r.error, mustRefetch: true, since: r.since })

const waitFull = (scope: "key" | "process") =>
  errorAnswer(
    rateLimited(
      scope === "key"
        ? "too many requests of this key are waiting for changes; follow with fewer at once"
        : "too many requests are waiting for changes on this server; try again shortly"
    ),
    { "retry-after": "1" }
  )

// The bytes of an answer and their ETag, made once for every waiting request one read answers.
const held = new WeakMap<object, { readonly bytes: Buffer; readonly etag: string }>()
const heldBody = (page: StreamPage) => {
  let b = held.get(page)
  if (b === undefined) {
    const bytes = Buffer.from(pageBody(page))
    held.set(page, (b = { bytes, etag: etagOf(bytes) }))
  }
  return b
}

const sseEvent = (event: string, data: string, id?: string) =>
  `${id === undefined ? "" : `id: ${id}\n`}event: ${event}\ndata: ${data}\n\n`

/**
 * Holds a Node response's head and body as the router writes them, and sends `send`'s body in
 * their place later (its own length and ETag). The router's fiber ends at once; the connection
 * waits. A client gone meanwhile: `onClose`, and nothing is sent.
 */
const holdAnswer = (res: ServerResponse) => {
  let head: { status: number; message: string | undefined; headers: Record<string, string | Array<string> | number> } =
    { status: 200, message: undefined, headers: {} }
  const writeHead = res.writeHead.bind(res)
  const end = res.end.bind(res)
  res.writeHead = ((status: number, message?: unknown, headers?: unknown) => {
    // writeHead(status[, message][, headers]), as Node takes it.
    const text = typeof message === "string" ? message : undefined
    const given = (typeof message === "object" && message !== null ? message : headers) as
      | Record<string, string>
      | undefined
    // Kept for the whole wait: without the empty answer's ETag (the answer sent has its own), and
    // each value one flat string rather than the tree of pieces it was built from.
    const { etag: _empty, ...kept } = given ?? {}
    head = { status, message: text, headers: JSON.parse(JSON.stringify(kept)) }
    return res
  }) as typeof res.writeHead
  // The router's request fiber has ended once it ends the response, but the listeners it put on
  // the response (an interrupt for a client gone mid-answer; the request body's teardown at
  // `finish`) share a closure scope with the fiber and would keep it, with its request's
  // context, for the whole wait (bench:stream's heap snapshots). With the request read to its
  // end, neither has anything left to do, so they go. Node's own listener (a named, bound
  // function: the connection's next request after `finish`) stays; a router's listener that is
  // not an arrow is left too, costing memory only.
  type Listener = (...args: Array<unknown>) => void
  const routers = (event: "close" | "finish") => (res.listeners(event) as Array<Listener>).filter((l) => l.name === "")
  let theirs: { close: Array<Listener>; finish: Array<Listener> } | null = {
    close: routers("close"),
    finish: routers("finish")
  }
  res.end = (() => {
    setImmediate(() => {
      if (theirs === null || !res.req.complete) return
      for (const l of theirs.close) res.off("close", l)
      for (const l of theirs.finish) res.off("finish", l)
      theirs = null
    })
    return res
  }) as typeof res.end
  return {
    // `close` comes once: `on` spares the wrapper `once` would hold for the whole wait.
    onClose: (f: () => void) => res.on("close", f),
    /** The body in place of the held one; with `status` (a 409 found during the wait), that status and no ETag. */
    send: ({ bytes, etag }: { readonly bytes: Buffer; readonly etag?: string }, status?: number) => {
      res.writeHead = writeHead
      res.end = end
      if (res.destroyed) return
      const headers = {
        ...head.headers,
        "content-type": "application/json",
        "content-length": String(bytes.length),
        ...(etag === undefined ? {} : { etag })
      }
      // A 304 the router made for the empty answer's ETag is no answer to what came since.
      if (status !== undefined) writeHead(status, headers)
      else if (head.status === 304) writeHead(200, headers)
      else if (head.message === undefined) writeHead(head.status, headers)
      else writeHead(head.status, head.message, headers)
      end(bytes)
    }
  }
}

/**
 * A long-poll's wait, from outside the handler's generator: the promises a wait holds keep only
 * what they name, not the request's fiber, generator and context (bench:stream's heap snapshots).
 * `start` begins the wait and is not kept. The held answer is the wait's page, its 409, or `first`
 * when the wait ended or its read failed; a client gone meanwhile aborts the wait.
 */
const holdWait = (
  answer: ReturnType<typeof holdAnswer>,
  release: () => void,
  start: (signal: Hangup) => Promise<StreamPage | StreamRefetch>,
  first: StreamPage,
  onServed: ((offset: string) => Promise<void>) | undefined
) => {
  const abort = new Hangup()
  answer.onClose(() => {
    abort.abort()
    release()
  })
  // One async function rather than a chain of promises: each link would be held for the wait.
  const run = async () => {
    // Made when it is sent, not held through the wait.
    let body: { readonly bytes: Buffer; readonly etag?: string } | undefined
    let status: number | undefined
    try {
      const page = await start(abort)
      if (page._tag === "Refetch") {
        body = { bytes: Buffer.from(refetchBody(page)) }
        status = 409
      } else {
        if (page.count > 0) await onServed?.(page.nextOffset)
        body = heldBody(page)
      }
    } catch {
      // The wait's read failed: the empty answer; the client's next request meets the failure.
    }
    try {
      answer.send(body ?? heldBody(first), status)
    } finally {
      release()
    }
  }
  // A response Node can no longer take (its client gone mid-write) ends nothing else.
  run().catch(() => {})
}

export const StreamHandlers = HttpApiBuilder.group(ServiceApi, "stream", (handlers) =>
  Effect.gen(function* () {
    const feed = yield* StreamFeed
    const core: StreamCore = feed.core
    const shared = sharedReads(core)

    /** A read's failure as the endpoint's answer (a refusal, a 400 or 403), or its 409. */
    const answerRead = (key: CurrentKeyShape, r: Exclude<StreamRead, { _tag: "Page" }>) => {
      switch (r._tag) {
        case "Refused":
          return Effect.flatMap(feed.refusal(key, undefined, r.state), (e) => Effect.fail(e as never))
        case "Invalid":
          return Effect.fail(r.error as never)
        case "Forbidden":
          return Effect.fail(r.error as never)
        case "Refetch":
          return Effect.succeed(jsonAnswer(refetchBody(r), 409))
      }
    }

    /**
     * Server-sent events from a first page that read fine: its items, then every later change as it
     * is committed. The client's going away ends it (and its place among the waiting).
     */
    const eventStream = (
      key: StreamKey,
      ask: StreamAsk,
      first: StreamPage,
      firstTicket: number,
      release: () => void,
      onServed?: (offset: string) => Promise<void>
    ) => {
      const out = new PassThrough()
      const abort = new Hangup()
      const heartbeat = setInterval(() => out.write(": heartbeat\n\n"), HEARTBEAT_MS)
      // Writes after the client went (its stream closed) are dropped, not raised.
      out.on("error", () => {})
      out.on("close", () => {
        clearInterval(heartbeat)
        abort.abort()
        release()
      })
      // What a consumer was served is stored before the client sees it: it may ack it at once.
      const write = async (r: StreamPage) => {
        if (r.count > 0) await onServed?.(r.nextOffset)
        for (let i = 0; i < r.count; i++) out.write(sseEvent("change", r.itemJson[i]!, r.offsets[i]))
      }
      const follow = async () => {
        let page = first
        let after = ask.after
        // Taken before the read that made `page`: a notification since then means read again.
        let ticket = firstTicket
        for (;;) {
          await write(page)
          // Past what it wrote; from after=now or no offset, the place the first read found.
          after = page.nextOffset
          if (!page.more) {
            const why = await changeAfter(core.wake, key, page, ticket, Number.POSITIVE_INFINITY, abort)
            if (why === "aborted") return
          }
          ticket = core.wake.ticket()
          const next = await shared(key, { ...ask, after }, ticket)
          if (abort.aborted) return
          if (next._tag !== "Page") {
            out.end(
              next._tag === "Refetch"
                ? sseEvent("must-refetch", refetchBody(next))
                : sseEvent(
                    "error",
                    JSON.stringify({
                      error:
                        next._tag === "Refused" ? `the key may no longer read: ${next.state}` : httpMessage(next.error)
                    })
                  )
            )
            return
          }
          // Nothing new for this stream (another resource changed): keep the place, wait again.
          page = next
        }
      }
      // A failure (the database gone) ends the stream; the client reconnects with Last-Event-ID.
      follow().catch(() => {
        if (!out.destroyed)
          out.end(
            sseEvent(
              "error",
              JSON.stringify({ error: "the service could not read the stream; reconnect with Last-Event-ID" })
            )
          )
      })
      out.write(": connected\n\n")
      return HttpServerResponse.raw(out, {
        status: 200,
        contentType: "text/event-stream",
        headers: { "cache-control": "no-store", "x-accel-buffering": "no" }
      })
    }

    /** The stream's answer for `ask`: JSON (waiting up to `wait` seconds) or events. */
    const serve = (
      key: CurrentKeyShape,
      ask: StreamAsk,
      wait: number | undefined,
      onServed?: (offset: string) => Promise<void>
    ) =>
      Effect.gen(function* () {
        const request = yield* HttpServerRequest.HttpServerRequest
        const events = (request.headers.accept ?? "").includes("text/event-stream")
        const k = keyOf(key)
        if (events) {
          const release = core.wake.acquire(k.keyId)
          if (typeof release === "string") return waitFull(release)
          const ticket = core.wake.ticket()
          const first = yield* Effect.promise(() => shared(k, ask, ticket, false))
          if (first._tag !== "Page") {
            release()
            return yield* answerRead(key, first)
          }
          return eventStream(k, ask, first, ticket, release, onServed)
        }
        const ticket = core.wake.ticket()
        const r = yield* Effect.promise(() => shared(k, ask, ticket, false))
        if (r._tag !== "Page") return yield* answerRead(key, r)
        if (r.count > 0 || wait === undefined || ask.after === "now") {
          if (r.count > 0 && onServed !== undefined) yield* Effect.promise(() => onServed(r.nextOffset))
          return jsonAnswer(pageBody(r))
        }
        const release = core.wake.acquire(k.keyId)
        if (typeof release === "string") return waitFull(release)
        // The wait holds no request fiber: the request is answered at once, as far as the router
        // and its middleware know, and its answer is held at Node's response (its headers as they
        // made them) until a change comes or the wait ends. A waiting request then costs what its
        // connection costs (bench:stream: 10,000 on one process).
        holdWait(
          holdAnswer(NodeHttpServerRequest.toServerResponse(request) as ServerResponse),
          release,
          (signal) => waitForChanges(core, shared, k, ask, r, ticket, wait, signal),
          r,
          onServed
        )
        return jsonAnswer(pageBody(r))
      })

    const named = (name: string) => {
      const bad = checkName(name)
      return bad === undefined ? Effect.void : Effect.fail(bad)
    }
    const fail = (e: DomainError) => Effect.fail(e as never)

    return handlers
      .handle("stream", ({ query }) =>
        Effect.gen(function* () {
          const key = yield* CurrentKey
          const request = yield* HttpServerRequest.HttpServerRequest
          const resources =
            query.resources === undefined
              ? undefined
              : ([...new Set(query.resources.split(","))].sort() as ReadonlyArray<Resource>)
          const lastEventId = request.headers["last-event-id"]
          const after = query.after ?? (lastEventId === undefined || lastEventId === "" ? undefined : lastEventId)
          const ask: StreamAsk = {
            resources,
            spec: resources === undefined ? "all" : resources.join(","),
            after,
            limit: query.limit === undefined ? STREAM_DEFAULT_LIMIT : Number(query.limit)
          }
          return yield* serve(key, ask, query.wait === undefined ? undefined : Number(query.wait))
        })
      )
      .handle("consumers", () =>
        Effect.gen(function* () {
          const key = yield* CurrentKey
          const data = yield* Effect.promise(() => listConsumers(feed.primary, key.keyId))
          return { data }
        })
      )
      .handle("put", ({ params, payload }) =>
        Effect.gen(function* () {
          const key = yield* CurrentKey
          yield* named(params.name)
          const resources = normalResources(payload.resources)
          if (resources !== null && !Array.isArray(resources)) return yield* fail(resources as DomainError)
          const spec = consumerSpec(params.name)
          const k = keyOf(key)
          const list = resources as ReadonlyArray<Resource> | null
          const ask = (after: string | undefined): StreamAsk => ({
            resources: list ?? undefined,
            spec,
            after,
            limit: 0
          })
          let position: { readonly set: string | null } | undefined
          if (payload.after === null) position = { set: null }
          else if (payload.after !== undefined && payload.after !== "now") {
            const o = core.decode(k, spec, payload.after)
            if ("error" in o) return yield* fail(invalid(o.error.replace(/^after/, "after"), { field: "after" }))
            position = { set: payload.after }
          }
          // The present offset, read as after=now does (checking the key may read those resources).
          let refusal: StreamRead | undefined
          const present = async () => {
            const r = await core.read(k, ask("now"), true)
            if (r._tag !== "Page") {
              refusal = r
              throw new Error("refused")
            }
            return r.nextOffset
          }
          if (payload.after === "now") {
            const now = yield* Effect.promise(() => present().catch(() => null))
            if (now === null) return yield* answerRead(key, refusal as Exclude<StreamRead, { _tag: "Page" }>)
            position = { set: now }
          }
          const r = yield* Effect.promise(() =>
            putConsumer(feed.primary, key.keyId, params.name, list, position, present).catch((e: unknown) => {
              if (refusal !== undefined) return undefined
              throw e
            })
          )
          if (r === undefined) return yield* answerRead(key, refusal as Exclude<StreamRead, { _tag: "Page" }>)
          if ("_tag" in r) return yield* fail(r)
          return r.consumer
        })
      )
      .handle("get", ({ params }) =>
        Effect.gen(function* () {
          const key = yield* CurrentKey
          yield* named(params.name)
          const c = yield* Effect.promise(() => getConsumer(feed.primary, key.keyId, params.name))
          if (c === undefined) return yield* fail(notFound(`no consumer named ${params.name} of this key`))
          const { served: _served, ...shown } = c
          return shown
        })
      )
      .handle("delete", ({ params }) =>
        Effect.gen(function* () {
          const key = yield* CurrentKey
          yield* named(params.name)
          const gone = yield* Effect.promise(() => deleteConsumer(feed.primary, key.keyId, params.name))
          if (!gone) return yield* fail(notFound(`no consumer named ${params.name} of this key`))
        })
      )
      .handle("consumerStream", ({ params, query }) =>
        Effect.gen(function* () {
          const key = yield* CurrentKey
          yield* named(params.name)
          const c = yield* Effect.promise(() => getConsumer(feed.primary, key.keyId, params.name))
          if (c === undefined) return yield* fail(notFound(`no consumer named ${params.name} of this key`))
          const ask: StreamAsk = {
            resources: c.resources ?? undefined,
            spec: consumerSpec(params.name),
            after: c.position ?? undefined,
            limit: query.limit === undefined ? STREAM_DEFAULT_LIMIT : Number(query.limit)
          }
          const k = keyOf(key)
          // What it was served moves forward only: an ack may go up to it.
          const served = async (offset: string) => {
            const o = core.decode(k, ask.spec, offset)
            if ("error" in o) return
            return noteServed(feed.primary, key.keyId, params.name, o, offset, (t) => core.decode(k, ask.spec, t))
          }
          return yield* serve(key, ask, query.wait === undefined ? undefined : Number(query.wait), served)
        })
      )
      .handle("ack", ({ params, payload }) =>
        Effect.gen(function* () {
          const key = yield* CurrentKey
          yield* named(params.name)
          const k = keyOf(key)
          const spec = consumerSpec(params.name)
          const o = core.decode(k, spec, payload.offset)
          // A consumer that is not there is a 404 whatever the offset (it can have served none).
          if (
            "error" in o &&
            (yield* Effect.promise(() => getConsumer(feed.primary, key.keyId, params.name))) === undefined
          )
            return yield* fail(notFound(`no consumer named ${params.name} of this key`))
          if ("error" in o)
            return yield* fail(
              invalid(
                "offset: not an offset this consumer's stream served; pass one of its answers' offsets unchanged",
                { field: "offset" }
              )
            )
          const r = yield* Effect.promise(() =>
            ackConsumer(feed.primary, key.keyId, params.name, payload.offset, o, (t) => core.decode(k, spec, t))
          )
          if ("_tag" in r) return yield* fail(r)
          return r
        })
      )
  })
)
