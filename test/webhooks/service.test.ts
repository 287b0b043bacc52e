// The Effect faces of webhooks: the Webhooks service (typed DomainError) and
// DeliveryLive configured from the environment as main.ts will run it.
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Cause, ConfigProvider, Context, Effect, Exit, Layer, Option, Scope } from "effect"
import { describe, expect, it } from "vitest"
import { Database } from "../../src/platform/db/Database.ts"
import { Sql } from "../../src/platform/db/Sql.ts"
import { DeliveryEngine } from "../../src/webhooks/engine/engine.ts"
import { DeliveryLive } from "../../src/webhooks/background.ts"
import { Forbidden, type DomainError } from "../../src/domain/errors.ts"
import { httpStatus } from "../../src/faces/http/errors.ts"
import { Webhooks, WebhooksLive, webhooksLayer } from "../../src/webhooks/service.ts"
import { insertIncident } from "../support/app.ts"
import { ADMIN, at, makeKey, useWorld, waitFor } from "../support/world.ts"

const w = useWorld()

describe("Webhooks service", () => {
  it("fails with a typed DomainError the HTTP faces answer with its status, and succeeds with the value", async () => {
    const plain = await makeKey(w.db.sql, w.company.id, { webhooks: false })
    const run = <A>(f: (s: Webhooks["Service"]) => Effect.Effect<A, DomainError>) =>
      Effect.runPromiseExit(
        Effect.gen(function* () {
          return yield* f(yield* Webhooks)
        }).pipe(Effect.provide(webhooksLayer(w.deps)), Effect.provide(Sql.fromPool(w.db.sql)))
      )
    const refused = await run((s) =>
      s.createHook({ keyId: plain, companyId: w.company.id }, { url: w.receiver.url("/x"), event: "incident.created" })
    )
    expect(Exit.isFailure(refused)).toBe(true)
    const error = Exit.isFailure(refused) ? Option.getOrUndefined(Cause.findErrorOption(refused.cause)) : undefined
    expect(error).toBeInstanceOf(Forbidden)
    expect([error && httpStatus(error), error?.message]).toEqual([
      403,
      "this key does not have the webhooks permission"
    ])
    const made = await run((s) =>
      s.createEndpoint(ADMIN, {
        companyId: w.company.id,
        name: "svc",
        url: w.receiver.url("/svc"),
        events: ["incident.created"]
      })
    )
    expect(Exit.isSuccess(made) && made.value.secret.startsWith("whsec_")).toBe(true)
  })
})

describe("DeliveryLive and WebhooksLive from configuration", () => {
  // A database of its own: the one above holds a secret under the world's key, which this
  // key made under DATA_DIR would rightly be refused for (docs/deployment.md#several-replicas).
  const w = useWorld()

  it("read WEBHOOK_* and the secrets key, share it, and deliver", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "srs-webhooks-"))
    const env = ConfigProvider.layer(
      ConfigProvider.fromEnvRecord({
        DATA_DIR: dataDir,
        WEBHOOK_RETRY_SCHEDULE: "100ms",
        WEBHOOK_ALLOWED_NETWORKS: "127.0.0.0/8"
      })
    )
    const db = Layer.succeed(Database, { sql: w.db.sql, url: w.db.url, embedded: false })
    const layer = Layer.mergeAll(DeliveryLive, WebhooksLive).pipe(
      Layer.provide(Sql.layer),
      Layer.provide(db),
      Layer.provide(env)
    )
    const scope = Effect.runSync(Scope.make())
    try {
      const ctx = await Effect.runPromise(Layer.buildWithScope(layer, scope))
      // The key was made under DATA_DIR, owner-only.
      expect(statSync(join(dataDir, "secrets.key")).mode & 0o777).toBe(0o600)
      // NODE_EXTRA_CA_CERTS is how production trusts a private CA; the test receiver's CA was
      // made at run time, so this receiver answers with a TLS error, which is still an attempt.
      const webhooks = Context.get(ctx, Webhooks)
      const made = await Effect.runPromise(
        webhooks.createEndpoint(ADMIN, {
          companyId: w.company.id,
          name: "live",
          url: w.receiver.url("/live"),
          events: ["incident.created"]
        })
      )
      await insertIncident(w.db.sql, w.company.id)
      const engine = Context.get(ctx, DeliveryEngine)
      const d = await waitFor(async () => {
        const [row] = await w.db.sql<{ attempts: number; state: string; last_error: string }[]>`
          select attempts, state, last_error from service.webhook_deliveries where endpoint_id = ${made.id}`
        return row?.state === "failed" ? row : null
      }, "the delivery to fail")
      expect(d.attempts).toBe(2) // "100ms": two attempts in all
      // Counted once the write that recorded it returns, a moment after the row is visible.
      await waitFor(
        async () => ((await Effect.runPromise(engine.stats)).attempts >= 2 ? true : undefined),
        "the engine to count both attempts",
        5_000
      )
      expect(d.last_error).toMatch(/^tls: /)
      expect(at(w.receiver, "/live")).toHaveLength(0)
    } finally {
      await Effect.runPromise(Scope.close(scope, Exit.void))
      rmSync(dataDir, { recursive: true, force: true })
    }
  })

  it("refuses a malformed retry schedule at startup with a clear message", async () => {
    const env = ConfigProvider.layer(
      ConfigProvider.fromEnvRecord({
        DATA_DIR: tmpdir(),
        WEBHOOK_RETRY_SCHEDULE: "soon",
        SECRETS_KEY: randomBytes(32).toString("base64")
      })
    )
    const db = Layer.succeed(Database, { sql: w.db.sql, url: w.db.url, embedded: false })
    const exit = await Effect.runPromiseExit(
      Effect.scoped(Layer.build(DeliveryLive.pipe(Layer.provide(db), Layer.provide(env))))
    )
    expect(Exit.isFailure(exit)).toBe(true)
    expect(String(Exit.isFailure(exit) ? exit.cause : "")).toContain('WEBHOOK_RETRY_SCHEDULE: "soon" is not a wait')
  })
})
