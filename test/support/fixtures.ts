// The shared world of a test file or describe block, as fixtures: each `use…` registers its
// beforeAll (start) and afterAll (stop) and returns the thing at once, as a stand-in that
// reads through to the real one once its beforeAll has run. Hooks run in the order the
// fixtures are called and stop in reverse, so a server stops before its database is dropped.
import { chmodSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, afterEach, beforeAll } from "vitest"
import { OPENAPI_PATH } from "../../src/faces/api/definition.ts"
import type { ApiSettingsShape } from "../../src/faces/routes.ts"
import { seedDemo } from "../../src/seed/demo.ts"
import type { WebhookDeps } from "../../src/webhooks/engine/settings.ts"
import { startEmbedded, type EmbeddedServer } from "../../src/platform/db/embedded.ts"
import { makeCompany } from "./app.ts"
import { restartablePort } from "./net.ts"
import { freshDatabase, freshSplit, type SplitDatabases, type TestDatabase } from "./db.ts"
import { startHttpsReceiver, type Receiver } from "./https-receiver.ts"
import { checkedClient, openApiChecker, request, type CheckedClient, type OpenApiChecker } from "./http.ts"
import { startServer, type TestServer } from "./server.ts"
import { NEVER_MARK } from "./views.ts"
import { parseAllowedNetworksOrThrow } from "../../src/webhooks/net/address-guard.ts"

/** The server's options that let webhooks reach receivers on loopback (as WEBHOOK_ALLOWED_NETWORKS=127.0.0.0/8). */
export const LOOPBACK_WEBHOOKS: { readonly webhooks: Partial<WebhookDeps> } = {
  webhooks: { allowed: parseAllowedNetworksOrThrow("127.0.0.0/8") }
}

/**
 * A value made later (in a beforeAll): the stand-in forwards every read to it, getters
 * included (a receiver's `requests` is read live), and fails clearly when read too early.
 */
export const late = <A extends object>(
  what: string
): { readonly value: A; readonly set: (a: A) => void; readonly isSet: () => boolean } => {
  let current: A | undefined
  const get = (): A => {
    if (current === undefined) throw new Error(`${what} is used before its beforeAll made it`)
    return current
  }
  const value = new Proxy({} as A, {
    get: (_, p) => Reflect.get(get(), p),
    has: (_, p) => Reflect.has(get(), p),
    ownKeys: () => Reflect.ownKeys(get()),
    getOwnPropertyDescriptor: (_, p) => {
      const d = Reflect.getOwnPropertyDescriptor(get(), p)
      return d === undefined ? undefined : { ...d, configurable: true }
    }
  })
  return { value, set: (a) => void (current = a), isSet: () => current !== undefined }
}

/** Starts something in beforeAll and stops it in afterAll (if it started). */
export const useResource = <A extends object>(
  what: string,
  start: () => Promise<A>,
  stop: (a: A) => Promise<unknown>
): A => {
  const r = late<A>(what)
  beforeAll(async () => r.set(await start()))
  afterAll(async () => {
    if (r.isSet()) await stop(r.value)
  })
  return r.value
}

/** A fresh database (migrated unless told otherwise), dropped afterwards. */
export const useDatabase = (options: { migrated?: boolean } = {}): TestDatabase =>
  useResource(
    "the test database",
    () => freshDatabase(options),
    (db) => db.drop()
  )

/** Two fresh databases, the app's and the service's own (freshSplit), dropped afterwards. */
export const useSplitDatabases = (): SplitDatabases =>
  useResource(
    "the app's and the service's test databases",
    () => freshSplit(),
    (d) => d.drop()
  )

/** A company of the app's (makeCompany) in the database, made in beforeAll. */
export const useCompany = (db: Pick<TestDatabase, "sql">) =>
  useResource(
    "the company",
    () => makeCompany(db.sql),
    async () => {}
  )

/** A PostgreSQL of the describe block's own, to stop and start again on the same port and data. */
export const useRestartableServer = (prefix: string) => {
  let dir = ""
  let port = 0
  let server: EmbeddedServer | undefined
  const start = async () => {
    server = await startEmbedded({ dataDir: dir, port })
  }
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), prefix))
    chmodSync(dir, 0o755)
    port = await restartablePort()
    await start()
  })
  afterAll(async () => {
    await server?.stop()
    rmSync(dir, { recursive: true, force: true })
  })
  return {
    get url(): string {
      return server!.url
    },
    stop: () => server!.stop(),
    start
  }
}

/** A temporary directory maker; what it made is removed after each test. */
export const useTempDirs = (prefix: string): (() => string) => {
  const dirs: Array<string> = []
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
  })
  return () => {
    const d = mkdtempSync(join(tmpdir(), prefix))
    dirs.push(d)
    return d
  }
}

/** A fresh database with the demo app's data. */
export const useDemoDatabase = (): TestDatabase => {
  const db = useDatabase()
  useResource(
    "the demo data",
    async () => ({ summary: await seedDemo(db.sql) }),
    async () => {}
  )
  return db
}

/** The real HTTP server (read API, docs, admin API) on the database. */
export const useServer = (
  db: Pick<TestDatabase, "url">,
  settings: Partial<ApiSettingsShape> = {},
  options: { readonly poolSize?: number; readonly webhooks?: Partial<WebhookDeps> } = {}
): TestServer =>
  useResource(
    "the test server",
    () => startServer(db.url, settings, options),
    (s) => s.close()
  )

/** A real HTTPS receiver on loopback (trusted CA unless told otherwise). */
export const useReceiver = (options: Parameters<typeof startHttpsReceiver>[0] = {}): Receiver =>
  useResource(
    "the HTTPS receiver",
    () => startHttpsReceiver(options),
    (r) => r.close()
  )

/**
 * The read API for a file or describe block: a fresh database, the server (no rate limit to
 * speak of unless told), a checker of its served OpenAPI document (OPENAPI_PATH), and `api`,
 * GETs checked against it, the error shape, NEVER data and the RateLimit fields.
 */
export const useReadApi = (
  settings: Partial<ApiSettingsShape> = { rateLimit: 1_000_000 },
  options: { readonly webhooks?: Partial<WebhookDeps> } = {}
): {
  readonly db: TestDatabase
  readonly server: TestServer
  readonly checker: OpenApiChecker
  readonly api: CheckedClient
} => {
  const db = useDatabase()
  const server = useServer(db, settings, options)
  const checker = useResource(
    "the OpenAPI checker",
    async () => {
      const doc = await request(server.url, OPENAPI_PATH)
      if (doc.status !== 200) throw new Error(`GET ${OPENAPI_PATH} answered ${doc.status}: ${doc.text}`)
      return openApiChecker(doc.json)
    },
    async () => {}
  )
  const api = useResource(
    "the checked client",
    async () => checkedClient(server.url, checker, NEVER_MARK),
    async () => {}
  )
  return { db, server, checker, api }
}
