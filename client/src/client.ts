// A small client of the Safety Records API: fetch, the generated types, nothing else.
import { MustRefetchError, SafetyRecordsError } from "./errors.ts"
import type {
  ApiIndex,
  Consumer,
  CreateHook,
  Deletion,
  DeletionsPage,
  DeletionsParams,
  Event,
  EventsPage,
  EventsParams,
  HookDeliveriesPage,
  HookDeliveriesParams,
  HookDelivery,
  HookDeliveryDetail,
  HookList,
  HookRecovery,
  HookSubscription,
  HookSubscriptionWithSecret,
  ListPage,
  ListParams,
  RecordOf,
  Resource,
  StreamItem,
  StreamPage,
  StreamParams
} from "./types.ts"

export interface ClientOptions {
  /** The service's address, e.g. https://acme.example.com: a key works only at its own company's. */
  readonly baseUrl: string
  /** An API key, mk_... */
  readonly apiKey: string
  /** The fetch to use (globalThis.fetch when absent). */
  readonly fetch?: typeof globalThis.fetch
  /** How many times a request refused with 429 is sent again after its Retry-After (3). */
  readonly maxRetries?: number
  /** The longest Retry-After the client waits for; a longer one fails at once (120 seconds). */
  readonly maxRetryWaitSeconds?: number
  /** How many records get() remembers with their ETag, to ask with If-None-Match (1000; 0: none). */
  readonly cacheSize?: number
}

/** One run of sync(): read `changed`, then `deleted`, then store `next()` for the next run. */
export interface SyncRun<R extends Resource> {
  /** Every record of the resource that changed since the last run (all of them the first time), oldest change first. */
  readonly changed: AsyncIterable<RecordOf<R>>
  /** Every record of the resource deleted since the last run (in the last 30 days the first time), oldest first. */
  readonly deleted: AsyncIterable<Deletion>
  /** Where the next run starts, to pass as `since`; once both iterables were read to the end. */
  readonly next: () => string
}

type Query = Readonly<Record<string, string | number | undefined>>

interface Answer<T> {
  readonly status: number
  readonly headers: Headers
  readonly body: T
}

const API = "/api/v1"

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** Retry-After as seconds: a number of seconds or an HTTP date. */
const retryAfterSeconds = (value: string | null): number | undefined => {
  if (value === null) return undefined
  if (/^\d+$/.test(value.trim())) return Number(value.trim())
  const at = Date.parse(value)
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - Date.now()) / 1000))
}

/**
 * `since` of a sync: what next() returned ("updatedAfter=...&deletedSince=..."), one moment for
 * both (an ISO 8601 date or date-time), or nothing (from the start).
 */
const parseSince = (
  since: string | null | undefined
): { updatedAfter: string | undefined; deletedSince: string | undefined } => {
  if (since === undefined || since === null || since.trim() === "")
    return { updatedAfter: undefined, deletedSince: undefined }
  if (!since.includes("=")) return { updatedAfter: since.trim(), deletedSince: since.trim() }
  const p = new URLSearchParams(since)
  return { updatedAfter: p.get("updatedAfter") || undefined, deletedSince: p.get("deletedSince") || undefined }
}

export class SafetyRecordsClient {
  readonly #base: string
  readonly #authorization: string
  readonly #fetch: typeof globalThis.fetch
  readonly #maxRetries: number
  readonly #maxRetryWait: number
  readonly #cacheSize: number
  readonly #cache = new Map<string, { readonly etag: string; readonly value: unknown }>()

  constructor(options: ClientOptions) {
    this.#base = options.baseUrl.replace(/\/+$/, "")
    this.#authorization = `Bearer ${options.apiKey}`
    this.#fetch = options.fetch ?? globalThis.fetch
    this.#maxRetries = options.maxRetries ?? 3
    this.#maxRetryWait = options.maxRetryWaitSeconds ?? 120
    this.#cacheSize = options.cacheSize ?? 1000
  }

  // ---------------------------------------------------------------------------
  // Requests

  async #request<T>(
    method: string,
    path: string,
    options: {
      readonly query?: Query
      readonly body?: unknown
      readonly etag?: string
      readonly headers?: Readonly<Record<string, string>>
    } = {}
  ): Promise<Answer<T>> {
    const search = new URLSearchParams()
    for (const [k, v] of Object.entries(options.query ?? {})) if (v !== undefined) search.set(k, String(v))
    const url = `${this.#base}${path}${search.size > 0 ? `?${search}` : ""}`
    const headers: Record<string, string> = {
      ...options.headers,
      authorization: this.#authorization,
      accept: "application/json"
    }
    if (options.body !== undefined) headers["content-type"] = "application/json"
    if (options.etag !== undefined) headers["if-none-match"] = options.etag
    for (let attempt = 0; ; attempt++) {
      const response = await this.#fetch(url, {
        method,
        headers,
        ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) })
      })
      const text = await response.text()
      if (response.status === 429) {
        const wait = retryAfterSeconds(response.headers.get("retry-after"))
        if (attempt < this.#maxRetries && (wait ?? 1) <= this.#maxRetryWait) {
          // The window turns at Retry-After; a little later, so that the clocks need not agree.
          await sleep((wait ?? 1) * 1000 + 50)
          continue
        }
        throw new SafetyRecordsError(429, errorMessage(text, response.status), wait)
      }
      if (response.status === 409) {
        const refetch = mustRefetch(text)
        if (refetch !== undefined) throw new MustRefetchError(refetch.error, refetch.since)
      }
      if (response.status >= 400) throw new SafetyRecordsError(response.status, errorMessage(text, response.status))
      return {
        status: response.status,
        headers: response.headers,
        body: (text === "" ? undefined : JSON.parse(text)) as T
      }
    }
  }

  async #getJson<T>(path: string, query?: Query): Promise<T> {
    return (await this.#request<T>("GET", path, query === undefined ? {} : { query })).body
  }

  /** Follows nextCursor from the given page on, yielding each item. */
  async *#pages<T>(
    page: (
      cursor: string | undefined
    ) => Promise<{ readonly data: ReadonlyArray<T>; readonly nextCursor: string | null }>,
    cursor: string | undefined
  ) {
    do {
      const p = await page(cursor)
      yield* p.data
      cursor = p.nextCursor ?? undefined
    } while (cursor !== undefined)
  }

  // ---------------------------------------------------------------------------
  // Records

  /** GET /api/v1: the key's company, the key, the resources it can read and the events it may subscribe to. */
  index(): Promise<ApiIndex> {
    return this.#getJson<ApiIndex>(API)
  }

  /** One page of a resource's list. */
  listPage<R extends Resource>(resource: R, params: ListParams<R> = {} as ListParams<R>): Promise<ListPage<R>> {
    return this.#getJson<ListPage<R>>(`${API}/${resource}`, params as Query)
  }

  /** Every record of a resource's list (from params.cursor on), page after page as they are read. */
  list<R extends Resource>(
    resource: R,
    params: ListParams<R> = {} as ListParams<R>
  ): AsyncGenerator<RecordOf<R>, void, undefined> {
    return this.#pages<RecordOf<R>>(
      (cursor) =>
        this.listPage(resource, { ...params, cursor } as ListParams<R>) as Promise<{
          data: ReadonlyArray<RecordOf<R>>
          nextCursor: string | null
        }>,
      (params as { cursor?: string }).cursor
    )
  }

  /**
   * One record. A record read before is asked for with its ETag (If-None-Match): while it is
   * unchanged the API answers 304 with no body, and the record read before is returned.
   */
  async get<R extends Resource>(resource: R, id: string): Promise<RecordOf<R>> {
    const path = `${API}/${resource}/${encodeURIComponent(id)}`
    const cached = this.#cache.get(path)
    const answer = await this.#request<{ data: RecordOf<R> }>(
      "GET",
      path,
      cached === undefined ? {} : { etag: cached.etag }
    )
    if (answer.status === 304 && cached !== undefined) {
      this.#remember(path, cached.etag, cached.value)
      return cached.value as RecordOf<R>
    }
    const etag = answer.headers.get("etag")
    if (etag !== null) this.#remember(path, etag, answer.body.data)
    return answer.body.data
  }

  #remember(path: string, etag: string, value: unknown) {
    if (this.#cacheSize <= 0) return
    // A Map keeps insertion order: deleting and setting again makes this the newest.
    this.#cache.delete(path)
    this.#cache.set(path, { etag, value })
    if (this.#cache.size > this.#cacheSize) this.#cache.delete(this.#cache.keys().next().value!)
  }

  // ---------------------------------------------------------------------------
  // Keeping a copy in step

  /** One page of GET /api/v1/deletions. */
  deletionsPage(params: DeletionsParams = {}): Promise<DeletionsPage> {
    return this.#getJson<DeletionsPage>(`${API}/deletions`, params as Query)
  }

  /** Records deleted in the last 30 days that the key can read, oldest first, every page. */
  deletions(params: DeletionsParams = {}): AsyncGenerator<Deletion, void, undefined> {
    return this.#pages<Deletion>((cursor) => this.deletionsPage({ ...params, cursor }), params.cursor)
  }

  /**
   * What changed and what was deleted in a resource since the last run. `since` is what
   * next() returned last time; absent the first time (then every record comes, and the
   * deletions of the last 30 days). Read `changed` to the end, then `deleted`, apply both by
   * id, and store next(). Running again from an older `since` does no harm: records and
   * deletions already applied come again.
   */
  sync<R extends Resource>(resource: R, since?: string | null, options: { readonly limit?: number } = {}): SyncRun<R> {
    const start = parseSince(since)
    let updatedAfter = start.updatedAfter
    let deletedSince = start.deletedSince
    let changedDone = false
    let deletedDone = false
    const limit = options.limit ?? 200
    const self = this
    return {
      changed: {
        async *[Symbol.asyncIterator]() {
          let cursor: string | undefined
          do {
            const query = { sort: "updatedAt", limit, updatedAfter: start.updatedAfter, cursor } as ListParams<R>
            const page = (await self.listPage(resource, query)) as {
              data: ReadonlyArray<RecordOf<R>>
              nextCursor: string | null
              nextUpdatedAfter?: string | null
            }
            yield* page.data
            cursor = page.nextCursor ?? undefined
            // Only the last page carries it: the change time of the last record, or the bound given.
            if (cursor === undefined) updatedAfter = page.nextUpdatedAfter ?? start.updatedAfter
          } while (cursor !== undefined)
          changedDone = true
        }
      },
      deleted: {
        async *[Symbol.asyncIterator]() {
          for await (const d of self.deletions({ resource, limit, since: start.deletedSince } as DeletionsParams)) {
            yield d
            deletedSince = d.deletedAt
          }
          deletedDone = true
        }
      },
      next: () => {
        if (!changedDone || !deletedDone) throw new Error("sync: read changed and deleted to the end before next()")
        const p = new URLSearchParams()
        if (updatedAfter !== undefined) p.set("updatedAfter", updatedAfter)
        if (deletedSince !== undefined) p.set("deletedSince", deletedSince)
        return p.toString()
      }
    }
  }

  // ---------------------------------------------------------------------------
  // The stream of changes, in commit order

  /**
   * One answer of GET /api/v1/stream: the changes after `after` (an offset, or "now"), at most
   * `limit`; with `wait` (seconds) it waits for one when nothing is new. A 409 throws
   * MustRefetchError: copy the records again, then follow from after "now".
   */
  streamPage(params: StreamParams = {}): Promise<StreamPage> {
    return this.#getJson<StreamPage>(`${API}/stream`, params as Query)
  }

  /**
   * Every change from `after` on, as they are committed, for ever (long-polls of `wait` seconds,
   * 30 by default). Store each item's offset once it is applied: pass it as `after` to resume.
   */
  async *follow(params: StreamParams = {}): AsyncGenerator<StreamItem, void, undefined> {
    let after = params.after
    for (;;) {
      const page = await this.streamPage({
        ...params,
        wait: params.wait ?? 30,
        ...(after === undefined ? {} : { after })
      })
      yield* page.data
      after = page.nextOffset
    }
  }

  /** Positions in the stream that the service keeps for this key (at most 20). */
  readonly consumers = {
    list: async (): Promise<ReadonlyArray<Consumer>> =>
      (await this.#getJson<{ data: ReadonlyArray<Consumer> }>(`${API}/consumers`)).data,
    /** Creates or changes one: `resources` (absent: all the key may read), `after` ("now" by default for a new one). */
    put: async (
      name: string,
      body: { readonly resources?: ReadonlyArray<Resource> | null; readonly after?: string | null } = {}
    ): Promise<Consumer> =>
      (await this.#request<Consumer>("PUT", `${API}/consumers/${encodeURIComponent(name)}`, { body })).body,
    get: (name: string): Promise<Consumer> => this.#getJson<Consumer>(`${API}/consumers/${encodeURIComponent(name)}`),
    delete: async (name: string): Promise<void> => {
      await this.#request<undefined>("DELETE", `${API}/consumers/${encodeURIComponent(name)}`)
    },
    /** Its changes from its acknowledged position (the same again until acknowledged). */
    stream: (name: string, params: { readonly wait?: number; readonly limit?: number } = {}): Promise<StreamPage> =>
      this.#getJson<StreamPage>(`${API}/consumers/${encodeURIComponent(name)}/stream`, params as Query),
    /** Moves its position to `offset` (never backwards). */
    ack: async (name: string, offset: string): Promise<Consumer> =>
      (await this.#request<Consumer>("POST", `${API}/consumers/${encodeURIComponent(name)}/ack`, { body: { offset } }))
        .body
  }

  // ---------------------------------------------------------------------------
  // Events and webhooks

  readonly events = {
    /** One page of GET /api/v1/events (the last 30 days). */
    listPage: (params: EventsParams = {}): Promise<EventsPage> =>
      this.#getJson<EventsPage>(`${API}/events`, params as Query),
    /** Every event of the last 30 days the key could subscribe to, newest first, every page. */
    list: (params: EventsParams = {}): AsyncGenerator<Event, void, undefined> =>
      this.#pages<Event>((cursor) => this.events.listPage({ ...params, cursor }), params.cursor),
    /** One event. */
    get: async (id: string): Promise<Event> =>
      (await this.#getJson<{ data: Event }>(`${API}/events/${encodeURIComponent(id)}`)).data
  }

  /** The key's own webhook subscriptions (the key needs the webhooks permission). */
  readonly hooks = {
    /**
     * Subscribes; the answer carries the key's signing secret (whsec_...), which is never shown
     * again. With an idempotencyKey (a UUID, say), sending the same subscribe again within 24
     * hours (after a timeout) answers the first answer; the same key with another body fails with 409.
     */
    create: async (hook: CreateHook, options: { readonly idempotencyKey?: string } = {}) =>
      (
        await this.#request<HookSubscriptionWithSecret>("POST", `${API}/hooks`, {
          body: hook,
          ...(options.idempotencyKey === undefined ? {} : { headers: { "idempotency-key": options.idempotencyKey } })
        })
      ).body,
    /** The key's subscriptions and the events it may subscribe to. */
    list: (): Promise<HookList> => this.#getJson<HookList>(`${API}/hooks`),
    get: (id: string): Promise<HookSubscription> =>
      this.#getJson<HookSubscription>(`${API}/hooks/${encodeURIComponent(id)}`),
    delete: async (id: string): Promise<void> => {
      await this.#request<undefined>("DELETE", `${API}/hooks/${encodeURIComponent(id)}`)
    },
    /** One page of a subscription's deliveries, newest first, with their latest attempts. */
    deliveriesPage: (id: string, params: HookDeliveriesParams = {}): Promise<HookDeliveriesPage> =>
      this.#getJson<HookDeliveriesPage>(`${API}/hooks/${encodeURIComponent(id)}/deliveries`, params as Query),
    /** Every delivery of a subscription (from params.cursor on), newest first, every page. */
    deliveries: (id: string, params: HookDeliveriesParams = {}): AsyncGenerator<HookDelivery, void, undefined> =>
      this.#pages<HookDelivery>((cursor) => this.hooks.deliveriesPage(id, { ...params, cursor }), params.cursor),
    /** One delivery with its latest attempts and the start of each answer. */
    delivery: (id: string, deliveryId: string): Promise<HookDeliveryDetail> =>
      this.#getJson<HookDeliveryDetail>(
        `${API}/hooks/${encodeURIComponent(id)}/deliveries/${encodeURIComponent(deliveryId)}`
      ),
    /** Sends a delivery again at once, under the same delivery id. */
    resend: async (id: string, deliveryId: string): Promise<HookDeliveryDetail> =>
      (
        await this.#request<HookDeliveryDetail>(
          "POST",
          `${API}/hooks/${encodeURIComponent(id)}/deliveries/${encodeURIComponent(deliveryId)}/resend`
        )
      ).body,
    /** Sends again what failed or never went since `since` (at most 30 days back), as a job; follow it with recovery(). */
    recover: async (id: string, since: string | Date): Promise<HookRecovery> =>
      (
        await this.#request<HookRecovery>("POST", `${API}/hooks/${encodeURIComponent(id)}/recover`, {
          body: { since: typeof since === "string" ? since : since.toISOString() }
        })
      ).body,
    /** A recovery this key started: its state, counts and progress. */
    recovery: (recoveryId: string): Promise<HookRecovery> =>
      this.#getJson<HookRecovery>(`${API}/replays/${encodeURIComponent(recoveryId)}`)
  }
}

/** The stream's refetch signal ({"error", "mustRefetch": true, "since"}), if the body is one. */
const mustRefetch = (text: string): { readonly error: string; readonly since: string } | undefined => {
  try {
    const body = JSON.parse(text) as { error?: unknown; mustRefetch?: unknown; since?: unknown }
    if (body.mustRefetch === true && typeof body.error === "string" && typeof body.since === "string")
      return { error: body.error, since: body.since }
  } catch {
    // not JSON
  }
  return undefined
}

const errorMessage = (text: string, status: number): string => {
  try {
    const body = JSON.parse(text) as { error?: unknown }
    if (typeof body.error === "string") return body.error
  } catch {
    // not JSON: a proxy's page, say
  }
  return text.trim() === "" ? `HTTP ${status}` : text.trim().slice(0, 500)
}
