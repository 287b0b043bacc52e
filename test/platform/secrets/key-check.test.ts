// One secrets key per database (docs/deployment.md#several-replicas), on a real database: the first process records
// its key's fingerprint, the same key passes, another key is refused naming SECRETS_KEY; on an
// upgrade (secrets stored, no fingerprint yet) a key that decrypts none of them is refused.
import { randomBytes, randomUUID } from "node:crypto"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { Cause, ConfigProvider, Context, Effect, Exit, Layer, Option } from "effect"
import type { Sql } from "postgres"
import { afterAll, describe, expect, it } from "vitest"
import { Database } from "../../../src/platform/db/Database.ts"
import { endpointSecretContext, keySecretContext } from "../../../src/platform/db/channels.ts"
import { checkSecretsKey, SecretsKeyMismatch, type KeyCheck } from "../../../src/platform/secrets/key-check.ts"
import {
  encryptSecret,
  keyFingerprint,
  loadSecretsKey,
  type SecretsKey
} from "../../../src/platform/secrets/secrets-key.ts"
import { WebhookSettings, WebhookSettingsLive } from "../../../src/webhooks/engine/settings.ts"
import { freshDatabase, type TestDatabase } from "../../support/db.ts"
import { makeKey } from "../../support/world.ts"
import { useTempDirs } from "../../support/fixtures.ts"
import { runSql } from "../../support/sql.ts"

const dbs: TestDatabase[] = []
const database = async () => {
  const db = await freshDatabase()
  dbs.push(db)
  return db
}
const tempDir = useTempDirs("srs-key-check-")
afterAll(async () => {
  for (const db of dbs) await db.drop()
})

const fromEnv = (key: Buffer): SecretsKey => ({ key, source: "SECRETS_KEY", path: null })

const refusal = (check: KeyCheck): string => {
  if (check.ok) throw new Error("expected a refusal, the key was accepted")
  expect(check.error).toBeInstanceOf(SecretsKeyMismatch)
  expect(check.error._tag).toBe("SecretsKeyMismatch")
  return check.error.message
}

const recorded = (sql: Sql) =>
  sql<
    { fingerprint: string; source: string; recorded_at: Date }[]
  >`select fingerprint, source, recorded_at from service.secrets_key`

/** Stored secrets as the webhook operations make them: one endpoint's, one API key's. */
const storeSecrets = async (sql: Sql, key: Buffer) => {
  const companyId = randomUUID()
  const endpointId = randomUUID()
  await sql`
    insert into service.webhook_endpoints (id, company_id, name, url, events, secret)
    values (${endpointId}, ${companyId}, 'ops', 'https://receiver.example/hook', ${["incident.created"]},
      ${encryptSecret(key, "whsec_endpoint", endpointSecretContext(endpointId))})`
  const keyId = await makeKey(sql, companyId)
  await sql`insert into service.webhook_key_secrets (key_id, secret) values (${keyId}, ${encryptSecret(key, "whsec_key", keySecretContext(keyId))})`
  return { endpointId, keyId }
}

describe("checkSecretsKey", () => {
  it("records the first process's key, passes the same key and refuses another, naming SECRETS_KEY", async () => {
    const { sql } = await database()
    const key = randomBytes(32)
    expect(await recorded(sql)).toEqual([])

    expect(await runSql(sql, checkSecretsKey(fromEnv(key)))).toEqual({ ok: true, recorded: true, undecryptable: [] })
    const [row] = await recorded(sql)
    expect(row).toMatchObject({ fingerprint: keyFingerprint(key), source: "SECRETS_KEY" })
    // Nothing secret stored: the table's columns, and no trace of the key in them.
    const columns = await sql<{ column_name: string }[]>`
      select column_name from information_schema.columns where table_schema = 'service' and table_name = 'secrets_key' order by ordinal_position`
    expect(columns.map((c) => c.column_name)).toEqual(["id", "fingerprint", "source", "recorded_at"])
    expect(JSON.stringify(row)).not.toContain(key.toString("hex"))
    expect(JSON.stringify(row)).not.toContain(key.toString("base64"))

    // The same key, again (a restart, another replica): passes, nothing new recorded.
    expect(await runSql(sql, checkSecretsKey(fromEnv(Buffer.from(key))))).toEqual({
      ok: true,
      recorded: false,
      undecryptable: []
    })
    expect(await recorded(sql)).toEqual([row])

    const message = refusal(await runSql(sql, checkSecretsKey(fromEnv(randomBytes(32)))))
    expect(message).toMatch(/^SECRETS_KEY: /)
    expect(message).toContain(
      "Give every process on this database (each replica of the service, and the admin CLI) the same SECRETS_KEY"
    )
    expect(message).toContain("its key comes from SECRETS_KEY")
    expect(message).toContain("re-encrypted under the new key, or every webhook signing secret rotated")
    expect(message).toContain(row!.recorded_at.toISOString())
    expect(await recorded(sql)).toEqual([row])
  })

  it("two processes starting together with different keys: one records, the other is refused", async () => {
    const { sql } = await database()
    const [a, b] = [randomBytes(32), randomBytes(32)]
    const checks = await Promise.all([
      runSql(sql, checkSecretsKey(fromEnv(a))),
      runSql(sql, checkSecretsKey(fromEnv(b)))
    ])
    expect(checks.filter((c) => c.ok)).toHaveLength(1)
    const [row] = await recorded(sql)
    expect(row!.fingerprint).toBe(keyFingerprint(checks[0]!.ok ? a : b))
  })

  it("a key from DATA_DIR: the refusal says where each key came from; a key file it has just made is removed", async () => {
    const { sql } = await database()
    const first = loadSecretsKey({ dataDir: tempDir() })
    expect(first.source).toBe("created")
    expect((await runSql(sql, checkSecretsKey(first))).ok).toBe(true)
    expect((await recorded(sql))[0]!.source).toBe("file")
    expect(await runSql(sql, checkSecretsKey(loadSecretsKey({ dataDir: join(first.path!, "..") })))).toEqual({
      ok: true,
      recorded: false,
      undecryptable: []
    })

    const otherDir = tempDir()
    const other = loadSecretsKey({ dataDir: otherDir })
    expect(other.source).toBe("created")
    const message = refusal(await runSql(sql, checkSecretsKey(other)))
    expect(message).toContain(`SECRETS_KEY is not set and there was no ${other.path}`)
    expect(message).toContain(
      "the content of secrets.key in the DATA_DIR of the process that first ran on this database"
    )
    expect(existsSync(other.path!)).toBe(false)
    // A key file that was there before is the operator's: kept.
    expect(loadSecretsKey({ dataDir: otherDir }).source).toBe("created")
    const kept = loadSecretsKey({ dataDir: otherDir })
    expect(kept.source).toBe("file")
    expect(refusal(await runSql(sql, checkSecretsKey(kept)))).toContain(
      `SECRETS_KEY is not set, so its key is the file ${kept.path}`
    )
    expect(existsSync(kept.path!)).toBe(true)
  })

  describe("upgrade: secrets stored before fingerprints were", () => {
    it("refuses a key that decrypts none of them, recording nothing; the right key is then recorded", async () => {
      const { sql } = await database()
      const right = randomBytes(32)
      await storeSecrets(sql, right)

      const message = refusal(await runSql(sql, checkSecretsKey(fromEnv(randomBytes(32)))))
      expect(message).toMatch(
        /^SECRETS_KEY: this process's secrets key decrypts none of the 2 webhook signing secrets this database holds/
      )
      expect(message).toContain("the same SECRETS_KEY")
      expect(await recorded(sql)).toEqual([])

      expect(await runSql(sql, checkSecretsKey(fromEnv(right)))).toEqual({
        ok: true,
        recorded: true,
        undecryptable: []
      })
      expect((await recorded(sql))[0]!.fingerprint).toBe(keyFingerprint(right))
    })

    it("accepts a key that decrypts some (secrets made by replicas with different keys), naming the others", async () => {
      const { sql } = await database()
      const [a, b] = [randomBytes(32), randomBytes(32)]
      const made = await storeSecrets(sql, a)
      const endpointId = randomUUID()
      await sql`
        insert into service.webhook_endpoints (id, company_id, name, url, events, secret)
        values (${endpointId}, ${randomUUID()}, 'made elsewhere', 'https://receiver.example/b', ${["incident.created"]},
          ${encryptSecret(b, "whsec_b", endpointSecretContext(endpointId))})`
      const check = await runSql(sql, checkSecretsKey(fromEnv(a)))
      expect(check).toEqual({ ok: true, recorded: true, undecryptable: [`endpoint ${endpointId}`] })
      expect(made.endpointId).not.toBe(endpointId)
    })
  })
})

describe("WebhookSettingsLive", () => {
  const build = (db: TestDatabase, env: Record<string, string>) =>
    Effect.runPromiseExit(
      Effect.scoped(
        Effect.gen(function* () {
          const context = yield* Layer.build(
            WebhookSettingsLive.pipe(
              Layer.provide(Layer.succeed(Database, { sql: db.sql, url: db.url, embedded: false })),
              Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnvRecord(env)))
            )
          )
          return Context.get(context, WebhookSettings).secretsKey.source
        })
      )
    )

  it("fails with the typed SecretsKeyMismatch for another SECRETS_KEY", async () => {
    const db = await database()
    const dataDir = tempDir()
    const key = randomBytes(32).toString("base64")
    const first = await build(db, { DATA_DIR: dataDir, SECRETS_KEY: key })
    expect(first).toEqual(Exit.succeed("SECRETS_KEY"))
    expect(await build(db, { DATA_DIR: dataDir, SECRETS_KEY: key })).toEqual(Exit.succeed("SECRETS_KEY"))
    const other = await build(db, { DATA_DIR: dataDir, SECRETS_KEY: randomBytes(32).toString("base64") })
    const error = Exit.isFailure(other) ? Option.getOrUndefined(Cause.findErrorOption(other.cause)) : undefined
    expect(error).toBeInstanceOf(SecretsKeyMismatch)
    expect((error as SecretsKeyMismatch).message).toMatch(/^SECRETS_KEY: /)
  })
})
