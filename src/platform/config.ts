// Every setting, its environment variable and its default. The README's configuration
// table mirrors this file.
import { Config, Context, Duration, Effect, Layer, Redacted } from "effect"
import { StartRefused } from "./db/refusal.ts"
import { DEFAULT_RETRY_SCHEDULE } from "../domain/retry-schedule.ts"
import { parseTrustProxy, TRUST_NONE, type TrustProxy } from "./http/client-address.ts"

/** What a process can run: the HTTP API and admin, capture (leader or standby), webhook delivery. */
export const SERVICE_ROLE_NAMES = ["api", "capture", "delivery"] as const
export type ServiceRole = (typeof SERVICE_ROLE_NAMES)[number]

/** SERVICE_ROLES: names separated by commas, in any order and case; undefined when empty or unknown. */
export const parseServiceRoles = (text: string): ReadonlyArray<ServiceRole> | undefined => {
  const names = text
    .split(",")
    .map((n) => n.trim().toLowerCase())
    .filter((n) => n !== "")
  if (names.length === 0 || names.some((n) => !(SERVICE_ROLE_NAMES as ReadonlyArray<string>).includes(n)))
    return undefined
  // Listed in one order whatever the order given, each once.
  return SERVICE_ROLE_NAMES.filter((r) => names.includes(r))
}

export const ServiceRolesConfig = Config.String("SERVICE_ROLES").pipe(Config.withDefault(SERVICE_ROLE_NAMES.join(",")))

/** This process's roles; the default (every role) is what a test server composed by hand runs. */
export const ServiceRoles = Context.Reference<ReadonlyArray<ServiceRole>>("service/ServiceRoles", {
  defaultValue: () => SERVICE_ROLE_NAMES
})

/** SERVICE_ROLES from the environment, refused (a defect: the process exits 1) when it names no known role. */
export const loadServiceRoles = Effect.gen(function* () {
  // The environment provider reads an empty variable as unset; an empty SERVICE_ROLES (say,
  // SERVICE_ROLES=${ROLES} with ROLES unset) is a mistake, not a request for every role.
  const raw = process.env.SERVICE_ROLES?.trim() === "" ? "" : yield* ServiceRolesConfig
  const roles = parseServiceRoles(raw)
  if (roles === undefined) {
    return yield* Effect.fail(
      new StartRefused({
        message: `SERVICE_ROLES must list one or more of ${SERVICE_ROLE_NAMES.join(", ")}, separated by commas (default ${SERVICE_ROLE_NAMES.join(",")}), not "${raw}"`
      })
    )
  }
  return roles
})

export const serviceRolesLayer = (roles: ReadonlyArray<ServiceRole>) => Layer.succeed(ServiceRoles, roles)

export const DatabaseConfig = Config.all({
  /** An existing PostgreSQL (wal_level=logical). Absent: the embedded one under DATA_DIR. */
  url: Config.option(Config.Redacted("DATABASE_URL")),
  /** The service's own database (its schema: mirror, views, outbox, deliveries, keys...). Absent: beside the app's tables. */
  serviceUrl: Config.option(Config.Redacted("SERVICE_DATABASE_URL")),
  dataDir: Config.String("DATA_DIR").pipe(Config.withDefault("./.data")),
  embeddedPort: Config.Port("EMBEDDED_PG_PORT").pipe(Config.withDefault(54329)),
  poolSize: Config.Int("DATABASE_POOL_SIZE").pipe(Config.withDefault(10))
})

export const HttpConfig = Config.all({
  port: Config.Port("PORT").pipe(Config.withDefault(3000)),
  host: Config.String("HOST").pipe(Config.withDefault("127.0.0.1"))
})

/**
 * The operations port: /metrics, /healthz and the detailed /readyz, apart from the public
 * port, on loopback unless told otherwise (a scraper in another container sets OPS_HOST).
 * OPS_PORT=0 takes any free port (several processes on one host, tests).
 */
export const OpsConfig = Config.all({
  port: Config.Int("OPS_PORT").pipe(Config.withDefault(9464)),
  host: Config.String("OPS_HOST").pipe(Config.withDefault("127.0.0.1"))
})

/** Limits of each HTTP server (the public port and the operations port): what one client may hold. */
const HttpLimitsConfig = Config.all({
  /** The request line and headers must arrive within this (a client trickling bytes is cut off). */
  headersTimeout: Config.Duration("HTTP_HEADERS_TIMEOUT").pipe(Config.withDefault(Duration.seconds(10))),
  /** The whole request, body included, must arrive within this. */
  requestTimeout: Config.Duration("HTTP_REQUEST_TIMEOUT").pipe(Config.withDefault(Duration.seconds(30))),
  /** An idle kept-alive connection is closed after this. */
  keepAliveTimeout: Config.Duration("HTTP_KEEP_ALIVE_TIMEOUT").pipe(Config.withDefault(Duration.seconds(5))),
  /** Request line and headers together, in bytes. */
  maxHeaderBytes: Config.Int("HTTP_MAX_HEADER_SIZE").pipe(Config.withDefault(16 * 1024)),
  /** Open connections per process; more are dropped as they come. */
  maxConnections: Config.Int("HTTP_MAX_CONNECTIONS").pipe(Config.withDefault(1000))
})

export type HttpLimits = {
  readonly headersTimeoutMs: number
  readonly requestTimeoutMs: number
  readonly keepAliveTimeoutMs: number
  readonly maxHeaderBytes: number
  readonly maxConnections: number
}

/** The HTTP limits from the environment, refused at start when they cannot work together. */
export const loadHttpLimits = Effect.gen(function* () {
  const c = yield* HttpLimitsConfig
  const limits: HttpLimits = {
    headersTimeoutMs: Duration.toMillis(c.headersTimeout),
    requestTimeoutMs: Duration.toMillis(c.requestTimeout),
    keepAliveTimeoutMs: Duration.toMillis(c.keepAliveTimeout),
    maxHeaderBytes: c.maxHeaderBytes,
    maxConnections: c.maxConnections
  }
  const refuse = (message: string) => Effect.fail(new StartRefused({ message }))
  if (limits.headersTimeoutMs < 1000 || limits.requestTimeoutMs < 1000)
    return yield* refuse("HTTP_HEADERS_TIMEOUT and HTTP_REQUEST_TIMEOUT must be at least 1 second")
  // Node itself refuses a headers timeout longer than the request's.
  if (limits.headersTimeoutMs > limits.requestTimeoutMs)
    return yield* refuse("HTTP_HEADERS_TIMEOUT must not be longer than HTTP_REQUEST_TIMEOUT")
  if (limits.maxHeaderBytes < 1024 || limits.maxHeaderBytes > 1024 * 1024)
    return yield* refuse("HTTP_MAX_HEADER_SIZE must be between 1024 and 1048576 bytes")
  if (limits.maxConnections < 1) return yield* refuse("HTTP_MAX_CONNECTIONS must be at least 1")
  return limits
})

/** Hot standbys of the service's database that serve the read API's queries (./db/read-replicas.ts). */
export interface ReadReplicaSettings {
  /** Connection URLs, one per standby, in the order given; empty: every read on the primary. */
  readonly urls: ReadonlyArray<string>
  /** A standby further behind than this is skipped. */
  readonly maxLagMs: number
}

export const NO_READ_REPLICAS: ReadReplicaSettings = { urls: [], maxLagMs: 5_000 }

const ORDINALS = ["first", "second", "third"]
const nth = (i: number) => ORDINALS[i] ?? `${i + 1}th`

/**
 * READ_DATABASE_URL: one or more postgres:// (or postgresql://) URLs separated by commas. A
 * comma starts a new URL only before `postgres://` or `postgresql://`, so a URL naming several
 * hosts itself (postgres://a,b/db, as libpq writes it) stays one. Pure; the error never
 * repeats a URL (it may hold a password).
 */
export const parseReadDatabaseUrls = (
  text: string
): { readonly urls: ReadonlyArray<string> } | { readonly error: string } => {
  const parts = text.split(/,(?=\s*postgres(?:ql)?:\/\/)/i).map((p) => p.trim())
  if (parts.length === 1 && parts[0] === "") return { urls: [] }
  const urls: Array<string> = []
  for (const [i, part] of parts.entries()) {
    // Checked by shape, not by URL parsing: a URL naming several hosts (a,b:5433) is no WHATWG URL.
    const m = /^postgres(?:ql)?:\/\/(?:[^@/?#\s]*@)?([^@/?#\s]+)([^\s]*)$/i.exec(part)
    if (m === null || m[2]!.includes(",")) {
      return {
        error: `READ_DATABASE_URL's ${nth(i)} URL is not a PostgreSQL URL: give postgres://user:password@host:port/database for each standby, separated by commas`
      }
    }
    if (urls.includes(part)) return { error: `READ_DATABASE_URL names the same standby twice (its ${nth(i)} URL)` }
    urls.push(part)
  }
  return { urls }
}

const ReadReplicasConfig = Config.all({
  urls: Config.Redacted("READ_DATABASE_URL").pipe(Config.withDefault(Redacted.make(""))),
  maxLag: Config.Duration("READ_MAX_LAG").pipe(Config.withDefault(Duration.seconds(5)))
})

/** READ_DATABASE_URL and READ_MAX_LAG from the environment, refused at start when they cannot work. */
export const loadReadReplicas = Effect.gen(function* () {
  const c = yield* ReadReplicasConfig
  const parsed = parseReadDatabaseUrls(Redacted.value(c.urls))
  const refuse = (message: string) => Effect.fail(new StartRefused({ message }))
  if ("error" in parsed) return yield* refuse(parsed.error)
  const maxLagMs = Duration.toMillis(c.maxLag)
  // The lag is measured once a second (docs/design.md, "Read replicas"): a bound below that cannot be told.
  if (maxLagMs < 1_000 || maxLagMs > 3_600_000)
    return yield* refuse("READ_MAX_LAG must be from 1 second to 1 hour (e.g. 5 seconds)")
  const settings: ReadReplicaSettings = { urls: parsed.urls, maxLagMs }
  return settings
})

/** TRUST_PROXY: who may say, in X-Forwarded-For, which client a request came from (./http/client-address.ts). */
export const TrustProxyConfig = Config.String("TRUST_PROXY").pipe(Config.withDefault("false"))

/** The proxies this process trusts; the default (none) is what a test server composed by hand has. */
export const TrustProxySetting = Context.Reference<TrustProxy>("service/TrustProxy", {
  defaultValue: () => TRUST_NONE
})

/** TRUST_PROXY from the environment, refused at start when it is not a value it takes. */
export const loadTrustProxy = Effect.gen(function* () {
  const parsed = parseTrustProxy(yield* TrustProxyConfig)
  if ("error" in parsed) return yield* Effect.fail(new StartRefused({ message: parsed.error }))
  return parsed
})

export const trustProxyLayer = (trust: TrustProxy) => Layer.succeed(TrustProxySetting, trust)

export const CaptureConfig = Config.all({
  slot: Config.String("REPLICATION_SLOT").pipe(Config.withDefault("safety_records_service")),
  publication: Config.String("PUBLICATION").pipe(Config.withDefault("safety_records_service")),
  /** Create the slot with `failover` (PostgreSQL 17+), so standbys that sync slots keep it. */
  failover: Config.Boolean("REPLICATION_SLOT_FAILOVER").pipe(Config.withDefault(false)),
  heartbeat: Config.Duration("CAPTURE_HEARTBEAT").pipe(Config.withDefault(Duration.seconds(15))),
  /** Nothing from the replication stream this long while WAL waits in the slot: stalled; capture reconnects. */
  stallTimeout: Config.Duration("CAPTURE_STALL_TIMEOUT").pipe(Config.withDefault(Duration.seconds(60))),
  /** Transactions applied together in one database transaction, at most. */
  batchChanges: Config.Int("CAPTURE_BATCH_CHANGES").pipe(Config.withDefault(2000))
})

export const SeedConfig = Config.all({
  /** Load demo data on the first start of an empty embedded database. */
  demo: Config.Boolean("SEED_DEMO").pipe(Config.withDefault(true))
})

/** REPLAY_RATE: deliveries per second a replay sends to one destination (src/webhooks/replay/lane.ts checks it). */
export const ReplayRateConfig = Config.String("REPLAY_RATE").pipe(Config.withDefault("10"))

/** Alert mails (docs/events.md#alerts-by-e-mail): unset SMTP_URL, no mail; src/webhooks/alerts/mail.ts checks them. */
export const AlertMailConfig = Config.all({
  url: Config.option(Config.Redacted("SMTP_URL")),
  from: Config.option(Config.String("ALERT_FROM"))
})

export const WebhookConfig = Config.all({
  retrySchedule: Config.String("WEBHOOK_RETRY_SCHEDULE").pipe(Config.withDefault(DEFAULT_RETRY_SCHEDULE)),
  allowedNetworks: Config.String("WEBHOOK_ALLOWED_NETWORKS").pipe(Config.withDefault("")),
  /** base64 of 32 bytes; absent with the embedded database: generated under DATA_DIR. */
  secretsKey: Config.option(Config.Redacted("SECRETS_KEY"))
})
