// Every setting, its environment variable and its default. The README's configuration
// table mirrors this file.
import { Config, Duration } from "effect"
import { DEFAULT_RETRY_SCHEDULE } from "./delivery/schedule.ts"

export const DatabaseConfig = Config.all({
  /** An existing PostgreSQL (wal_level=logical). Absent: the embedded one under DATA_DIR. */
  url: Config.option(Config.Redacted("DATABASE_URL")),
  dataDir: Config.String("DATA_DIR").pipe(Config.withDefault("./.data")),
  embeddedPort: Config.Port("EMBEDDED_PG_PORT").pipe(Config.withDefault(54329)),
  poolSize: Config.Int("DATABASE_POOL_SIZE").pipe(Config.withDefault(10))
})

export const HttpConfig = Config.all({
  port: Config.Port("PORT").pipe(Config.withDefault(3000)),
  host: Config.String("HOST").pipe(Config.withDefault("127.0.0.1"))
})

export const CaptureConfig = Config.all({
  slot: Config.String("REPLICATION_SLOT").pipe(Config.withDefault("safety_records_service")),
  publication: Config.String("PUBLICATION").pipe(Config.withDefault("safety_records_service")),
  /** Create the slot with `failover` (PostgreSQL 17+), so standbys that sync slots keep it. */
  failover: Config.Boolean("REPLICATION_SLOT_FAILOVER").pipe(Config.withDefault(false)),
  heartbeat: Config.Duration("CAPTURE_HEARTBEAT").pipe(Config.withDefault(Duration.seconds(15))),
  /** Transactions applied together in one database transaction, at most. */
  batchChanges: Config.Int("CAPTURE_BATCH_CHANGES").pipe(Config.withDefault(2000))
})

export const SeedConfig = Config.all({
  /** Load demo data on the first start of an empty embedded database. */
  demo: Config.Boolean("SEED_DEMO").pipe(Config.withDefault(true))
})

export const WebhookConfig = Config.all({
  retrySchedule: Config.String("WEBHOOK_RETRY_SCHEDULE").pipe(Config.withDefault(DEFAULT_RETRY_SCHEDULE)),
  allowedNetworks: Config.String("WEBHOOK_ALLOWED_NETWORKS").pipe(Config.withDefault("")),
  /** base64 of 32 bytes; absent with the embedded database: generated under DATA_DIR. */
  secretsKey: Config.option(Config.Redacted("SECRETS_KEY"))
})
