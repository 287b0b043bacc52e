// Shared set-up for webhook tests: a real database with capture running, a real HTTPS
// receiver, the operations' dependencies, and an engine that can be stopped and restarted.
import { randomBytes } from "node:crypto"
import { Effect, Exit, Scope } from "effect"
import { afterEach } from "vitest"
import type { Sql } from "postgres"
import { parseAllowedNetworksOrThrow, type Lookup } from "../../src/webhooks/net/address-guard.ts"
import {
  AttemptObserver,
  makeEngine,
  type AttemptObservation,
  type DeliveryEngineShape,
  type EngineOptions
} from "../../src/webhooks/engine/engine.ts"
import { fanoutRows } from "../../src/webhooks/engine/fanout-queries.ts"
import { parseRetryScheduleOrThrow } from "../../src/domain/retry-schedule.ts"
import { LoggingLive } from "../../src/platform/logging.ts"
import { makeReplayLane } from "../../src/webhooks/replay/lane.ts"
import type { Actor } from "../../src/access/activity.ts"
import type { WebhookDeps } from "../../src/webhooks/engine/settings.ts"
import { Sql as SqlService } from "../../src/platform/db/Sql.ts"
import { isDomainError, type DomainError } from "../../src/domain/errors.ts"
import { httpStatus } from "../../src/faces/http/errors.ts"
import { startCapture, useCapture, type RunningCapture } from "./capture.ts"
import { freshDatabase, type TestDatabase } from "./db.ts"
import { makeCompany } from "./app.ts"
import { useDatabase, useReceiver, useResource } from "./fixtures.ts"
import { startWebServer } from "./pages.ts"
import { startServer, type TestServer } from "./server.ts"
import type { ApiSettingsShape } from "../../src/faces/routes.ts"
import { waitFor } from "./wait.ts"
import { startHttpsReceiver, testCerts, type Receiver } from "./https-receiver.ts"
import { createEndpoint, type CreateEndpointInput } from "../../src/webhooks/endpoints/endpoints.ts"
import { createHook } from "../../src/webhooks/subscriptions/hooks.ts"
import { runSql } from "./sql.ts"

export { sleep, waitFor } from "./wait.ts"

export const LOOPBACK = parseAllowedNetworksOrThrow("127.0.0.0/8")
export const ADMIN: Actor = { kind: "user", id: null, email: "admin@example.test" }
export const CA = () => testCerts().trusted.caCert

/** A DNS table: answers from it, or ENOTFOUND. Mutable, to change answers between checks. */
export const dnsTable = (answers: Record<string, ReadonlyArray<string>>) => {
  const table = { ...answers }
  const lookup: Lookup = async (host) => {
    const a = table[host]
    if (!a) throw Object.assign(new Error(`ENOTFOUND ${host}`), { code: "ENOTFOUND" })
    return a.map((address) => ({ address, family: address.includes(":") ? (6 as const) : (4 as const) }))
  }
  return { lookup, table }
}

/** The operations' settings and the pool the test runs them on (`runSql(deps.sql, op(deps, ...))`) and the engine uses. */
export type TestDeps = WebhookDeps & { readonly sql: Sql }

export type World = {
  readonly db: TestDatabase
  readonly cap: RunningCapture
  readonly company: { id: string; host: string }
  readonly receiver: Receiver
  readonly deps: TestDeps
  readonly close: () => Promise<void>
}

export const startWorld = async (
  options: { lookup?: Lookup; modules?: ReadonlyArray<string>; tier?: string } = {}
): Promise<World> => {
  const db = await freshDatabase()
  const company = await makeCompany(db.sql, {
    ...(options.modules ? { modules: options.modules } : {}),
    ...(options.tier ? { tier: options.tier } : {})
  })
  const cap = startCapture(db)
  await cap.settle()
  const receiver = await startHttpsReceiver()
  const deps: TestDeps = {
    sql: db.sql,
    secretsKey: randomBytes(32),
    allowed: LOOPBACK,
    ca: CA(),
    pingTimeoutMs: 3_000,
    ...(options.lookup ? { lookup: options.lookup } : {})
  }
  return {
    db,
    cap,
    company,
    receiver,
    deps,
    close: async () => {
      await receiver.close()
      await cap.stop()
      await db.drop()
    }
  }
}

export type RunningEngine = DeliveryEngineShape & { readonly stop: () => Promise<void> }

/**
 * Starts an engine for the world's database, and the replay lane beside it as the service
 * runs them (at `replayRate`, default 100 per second); a fast schedule unless told otherwise.
 */
export const startEngine = async (
  deps: TestDeps,
  overrides: Partial<EngineOptions> & {
    retrySchedule?: string
    replayRate?: number
    replayLane?: boolean
    jsonLogs?: boolean
    observer?: (a: AttemptObservation) => void
  } = {}
): Promise<RunningEngine> => {
  const { retrySchedule, replayRate, replayLane, jsonLogs, observer, ...rest } = overrides
  const scope = Effect.runSync(Scope.make())
  // The service's own log lines (JSON on stdout), for tests that read them.
  const logs = <A, E>(self: Effect.Effect<A, E>) => (jsonLogs ? self.pipe(Effect.provide(LoggingLive)) : self)
  if (replayLane !== false) {
    await Effect.runPromise(
      logs(
        Scope.provide(scope)(
          makeReplayLane({ rate: replayRate ?? 100, pollMs: rest.pollMs ?? 500 }).pipe(
            Effect.provide(SqlService.fromPool(deps.sql))
          )
        )
      )
    )
  }
  const engine = await Effect.runPromise(
    logs(
      Scope.provide(scope)(
        makeEngine({
          sql: deps.sql,
          secretsKey: deps.secretsKey,
          allowed: deps.allowed,
          ca: deps.ca,
          lookup: deps.lookup,
          schedule: parseRetryScheduleOrThrow(retrySchedule ?? "100ms,100ms,100ms,100ms,100ms"),
          timeoutMs: 3_000,
          leaseMs: 20_000,
          pollMs: 500,
          ...rest
        }).pipe(observer ? Effect.provideService(AttemptObserver, observer) : (e) => e)
      )
    )
  )
  return { ...engine, stop: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
}

/** Runs `f` while an engine runs; the engine stops afterwards, whatever happens. */
export const withEngine = async <A>(
  deps: TestDeps,
  overrides: Parameters<typeof startEngine>[1],
  f: (engine: RunningEngine) => Promise<A>
): Promise<A> => {
  const engine = await startEngine(deps, overrides)
  try {
    return await f(engine)
  } finally {
    await engine.stop()
  }
}

/** The world for a file or describe block: made in beforeAll, closed in afterAll. */
export const useWorld = (options: Parameters<typeof startWorld>[0] = {}): World =>
  useResource(
    "the world",
    () => startWorld(options),
    (w) => w.close()
  )

export interface ServiceWorld {
  readonly db: TestDatabase
  readonly cap: RunningCapture
  readonly server: TestServer
  /** Only with a receiver (the default). */
  readonly receiver: Receiver
  /** The webhook dependencies the server and engine share (loopback allowed, the test CA); only with a receiver. */
  readonly deps: TestDeps
  /** Only with a receiver, and unless `engine: false`. */
  readonly engine: RunningEngine
}

/**
 * The service in this process, for a describe block: a fresh database whose app rows `seed`
 * writes before capture starts (capture mirrors them, as in production), capture caught up,
 * a real HTTPS receiver and the webhook dependencies trusting it, the HTTP server with them
 * (and the admin pages when `pages`), and a delivery engine. Stopped in reverse order.
 */
export const useServiceWorld = (options: {
  readonly seed: (sql: Sql) => Promise<unknown>
  readonly receiver?: boolean
  readonly pages?: boolean
  readonly settings?: Partial<ApiSettingsShape>
  readonly engine?: Parameters<typeof startEngine>[1] | false
}): ServiceWorld => {
  const db = useDatabase()
  useResource(
    "the app rows",
    async () => ({ seeded: await options.seed(db.sql) }),
    async () => {}
  )
  const cap = useCapture(db)
  if (options.receiver === false) {
    const server = useResource(
      "the test server",
      () => (options.pages ? startWebServer(db.url) : startServer(db.url, options.settings)),
      (s) => s.close()
    )
    return { db, cap, server } as ServiceWorld
  }
  const receiver = useReceiver()
  const deps = useResource<TestDeps>(
    "the webhook dependencies",
    async () => ({ sql: db.sql, secretsKey: randomBytes(32), allowed: LOOPBACK, ca: CA(), pingTimeoutMs: 3_000 }),
    async () => {}
  )
  const server = useResource(
    "the test server",
    () => {
      const { sql: _sql, ...webhooks } = deps
      return options.pages ? startWebServer(db.url, webhooks) : startServer(db.url, options.settings, { webhooks })
    },
    (s) => s.close()
  )
  const engine =
    options.engine === false ? (undefined as unknown as RunningEngine) : useEngine({ deps }, options.engine)
  return { db, cap, receiver, deps, server, engine }
}

/** An engine on the world for the file or block (after the world starts, stopped before it closes). */
export const useEngine = (w: Pick<World, "deps">, overrides: Parameters<typeof startEngine>[1] = {}): RunningEngine =>
  useResource(
    "the engine",
    () => startEngine(w.deps, overrides),
    (e) => e.stop()
  )

/** An API key row, as the keys operations would make it. */
export const makeKey = async (
  sql: Sql,
  companyId: string,
  options: { scopes?: ReadonlyArray<string>; webhooks?: boolean; expiresAt?: Date | null } = {}
): Promise<string> => {
  const [k] = await sql<{ id: string }[]>`
    insert into service.api_keys (company_id, name, fingerprint, scopes, webhooks, expires_at)
    values (${companyId}, 'integration', ${randomBytes(32)}, ${options.scopes ?? ["incidents", "corrective-actions"]},
      ${options.webhooks ?? true}, ${options.expiresAt ?? null})
    returning id::text`
  return k!.id
}

/** Waits until every event in the outbox has been fanned out. */
export const fannedOut = async (sql: Sql) =>
  waitFor(async () => {
    const [r] = await sql<{ done: boolean }[]>`
      select coalesce((select (e.commit_lsn, e.seq) <= (f.commit_lsn, f.seq) from service.events e
        order by e.commit_lsn desc, e.seq desc limit 1), true) as done
      from service.webhook_fanout f`
    return r?.done
  }, "fan-out")

export type DeliveryRow = {
  id: string
  state: string
  attempts: number
  endpoint_id: string | null
  subscription_id: string | null
  last_status: number | null
  last_error: string | null
  held_reason: string | null
}

export const deliveries = (sql: Sql) =>
  sql<
    DeliveryRow[]
  >`select id::text, state, attempts, endpoint_id::text, subscription_id::text, last_status, last_error, held_reason
    from service.webhook_deliveries order by created_at, id`

/** The endpoint's deliveries, oldest first. */
export const deliveriesTo = async (sql: Sql, endpointId: string) =>
  (await deliveries(sql)).filter((d) => d.endpoint_id === endpointId)

/** Waits until exactly `n` of the endpoint's deliveries are in `state` (succeeded unless told), and returns them. */
export const deliveredTo = (sql: Sql, endpointId: string, n: number, what: string, state = "succeeded") =>
  waitFor(async () => {
    const ds = (await deliveriesTo(sql, endpointId)).filter((d) => d.state === state)
    return ds.length === n ? ds : null
  }, what)

export const attemptsOf = (sql: Sql, deliveryId: string) =>
  sql<{ number: number; status: number | null; error: string | null; error_kind: string | null; started_at: Date }[]>`
    select number, status, error, error_kind, started_at from service.webhook_attempts where delivery_id = ${deliveryId} order by number`

/** Requests the receiver got at a path. */
export const at = (receiver: Receiver, path: string) => receiver.requests.filter((r) => r.path === path)

/** Waits until the receiver has got exactly `n` requests at `path`, and returns them. */
export const arrived = (receiver: Receiver, path: string, n: number, what: string, timeoutMs?: number) =>
  waitFor(
    () => {
      const got = at(receiver, path)
      return got.length === n ? got : null
    },
    what,
    timeoutMs
  )

type Destinations = Pick<World, "db" | "deps" | "company" | "receiver">

/**
 * An admin's endpoint for the world's company at `path` on its receiver (or at `url`), named
 * after the path unless told, taking incident.created unless told.
 */
export const addEndpoint = (
  w: Destinations,
  path: string,
  options: Partial<Omit<CreateEndpointInput, "companyId">> = {}
) =>
  runSql(
    w.deps.sql,
    createEndpoint(w.deps, ADMIN, {
      ...options,
      companyId: w.company.id,
      name: options.name ?? path,
      url: options.url ?? w.receiver.url(path),
      events: options.events ?? ["incident.created"]
    })
  )

/**
 * A key's subscription at `path` on the world's receiver (or at `url`), to incident.created
 * unless told; the key is made (makeKey, with `key`'s options) unless `keyId` is given.
 */
export const addHook = async (
  w: Destinations,
  path: string,
  options: {
    readonly keyId?: string
    readonly key?: Parameters<typeof makeKey>[2]
    readonly url?: string
    readonly event?: string
    /** More of the body (rateLimit, ordering). */
    readonly more?: Record<string, unknown>
  } = {}
) => {
  const keyId = options.keyId ?? (await makeKey(w.db.sql, w.company.id, options.key))
  const made = await runSql(
    w.deps.sql,
    createHook(
      w.deps,
      { keyId, companyId: w.company.id },
      { url: options.url ?? w.receiver.url(path), event: options.event ?? "incident.created", ...options.more }
    )
  )
  return { ...made, keyId }
}

/** Fans the outbox out by hand into pending rows due now, without sending anything. */
export const fanoutNow = (sql: Sql) => fanoutRows(sql, 100_000, new Date())

/**
 * A world for the file and an engine per test: each test owns its destinations, and they are
 * deleted after it, so leftovers never receive the next test's events.
 */
export const useEngineWorld = (options: Parameters<typeof startWorld>[0] = {}) => {
  const state: { w: World; engine: RunningEngine | undefined } = { w: useWorld(options), engine: undefined }
  afterEach(async () => {
    await state.engine?.stop()
    state.engine = undefined
    await state.w.db.sql`delete from service.webhook_endpoints`
    await state.w.db.sql`delete from service.webhook_subscriptions`
  })
  return state
}

/** A domain error with the status the HTTP faces answer it with. */
export type Answered = DomainError & { readonly status: number }

export const answered = (e: DomainError): Answered => Object.assign(e, { status: httpStatus(e) })

/** The DomainError an operation fails with; it must fail, and with that. */
export const failure = async (p: Promise<unknown>): Promise<Answered> => {
  try {
    await p
  } catch (e) {
    if (isDomainError(e)) return answered(e)
    throw e
  }
  throw new Error("expected a DomainError")
}
