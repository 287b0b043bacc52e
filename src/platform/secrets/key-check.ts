// One secrets key per database (docs/deployment.md#several-replicas). A process with another key than the one the
// stored signing secrets are encrypted under fails every delivery it claims (burning retries,
// switching endpoints off) and encrypts new secrets no other process can read. So the
// database records the key's fingerprint (sql/011) and a process whose key differs refuses to
// start, saying what to do.
import { rmSync } from "node:fs"
import { Data, Effect, Runtime } from "effect"
import { query } from "../db/Sql.ts"
import { endpointSecretContext, keySecretContext } from "../db/channels.ts"
import { decryptSecret, keyFingerprint, SECRETS_KEY_FILE, type SecretsKey } from "./secrets-key.ts"

/**
 * This process's key is not the database's. The service (src/main.ts) and the admin CLI print
 * the message alone and exit 1.
 */
export class SecretsKeyMismatch extends Data.TaggedError("SecretsKeyMismatch")<{ readonly message: string }> {
  // main.ts prints it plainly; runMain's own report would add a stack trace to the log.
  override readonly [Runtime.errorReported] = false
}

export type KeyCheck =
  | {
      readonly ok: true
      /** This process recorded the fingerprint: the database had none. */
      readonly recorded: boolean
      /** On an upgrade, stored secrets this key does not decrypt ("endpoint <id>", "API key <id>"). */
      readonly undecryptable: ReadonlyArray<string>
    }
  | { readonly ok: false; readonly error: SecretsKeyMismatch }

type Recorded = { fingerprint: string; source: string; recorded_at: Date }

const thisProcess = (key: SecretsKey): string =>
  key.source === "SECRETS_KEY"
    ? "its key comes from SECRETS_KEY"
    : key.source === "file"
      ? `SECRETS_KEY is not set, so its key is the file ${key.path}`
      : `SECRETS_KEY is not set and there was no ${key.path}, so it made a new key there (now removed again: it is of no use with this database)`

const sameKeyAdvice = (whose: string): string =>
  `Give every process on this database (each replica of the service, and the admin CLI) the same SECRETS_KEY: ${whose}. ` +
  `Changing the key is not supported yet: the stored secrets would have to be re-encrypted under the new key, or every webhook signing secret rotated.`

const differs = (key: SecretsKey, recorded: Recorded): SecretsKeyMismatch =>
  new SecretsKeyMismatch({
    message:
      `SECRETS_KEY: this process's secrets key is not the one this database's webhook signing secrets are encrypted under ` +
      `(the database recorded another key's fingerprint on ${recorded.recorded_at.toISOString()}). ` +
      `This process: ${thisProcess(key)}. ` +
      sameKeyAdvice(
        recorded.source === "SECRETS_KEY"
          ? "the SECRETS_KEY value the other processes are given"
          : `the content of ${SECRETS_KEY_FILE} in the DATA_DIR of the process that first ran on this database (it had no SECRETS_KEY)`
      )
  })

const decryptsNone = (key: SecretsKey, count: number): SecretsKeyMismatch =>
  new SecretsKeyMismatch({
    message:
      `SECRETS_KEY: this process's secrets key decrypts none of the ${count} webhook signing secret${count === 1 ? "" : "s"} this database holds, ` +
      `so they were encrypted under another key. This process: ${thisProcess(key)}. ` +
      sameKeyAdvice(
        `the key of the processes that made these secrets (their SECRETS_KEY, or the content of ${SECRETS_KEY_FILE} in their DATA_DIR)`
      )
  })

/**
 * The refusal. A key file this process has just made is removed: left behind, it would be
 * taken for the right key next time, or by an operator looking for it.
 */
const refuse = (key: SecretsKey, error: SecretsKeyMismatch): Effect.Effect<KeyCheck> =>
  Effect.sync(() => {
    if (key.source === "created" && key.path !== null) rmSync(key.path, { force: true })
    return { ok: false, error }
  })

const readRecorded = Effect.map(
  query((sql) => sql<Recorded[]>`select fingerprint, source, recorded_at from service.secrets_key`),
  (rows) => rows[0]
)

/**
 * Checks this process's key against the database's, after migrations. With no fingerprint
 * yet, records this key's; on a database that already holds encrypted secrets (an upgrade),
 * only if this key decrypts at least one of them. Two processes starting together agree: the
 * first insert wins and both compare against what was stored.
 */
export const checkSecretsKey = Effect.fn("checkSecretsKey")(function* (key: SecretsKey) {
  const fingerprint = keyFingerprint(key.key)
  const stored = yield* readRecorded
  if (stored !== undefined)
    return stored.fingerprint === fingerprint ? accepted(false, []) : yield* refuse(key, differs(key, stored))

  // Every stored secret: few (one per endpoint, one per API key with webhooks), read once.
  const secrets = yield* query(
    (sql) => sql<{ kind: "endpoint" | "key"; id: string; secret: Buffer }[]>`
    select 'endpoint' as kind, id::text as id, secret from service.webhook_endpoints
    union all
    select 'key', key_id::text, secret from service.webhook_key_secrets`
  )
  const undecryptable: string[] = []
  for (const s of secrets) {
    try {
      decryptSecret(key.key, s.secret, s.kind === "endpoint" ? endpointSecretContext(s.id) : keySecretContext(s.id))
    } catch {
      undecryptable.push(`${s.kind === "endpoint" ? "endpoint" : "API key"} ${s.id}`)
    }
  }
  if (secrets.length > 0 && undecryptable.length === secrets.length)
    return yield* refuse(key, decryptsNone(key, secrets.length))

  const inserted = yield* query(
    (sql) => sql`
    insert into service.secrets_key (fingerprint, source) values (${fingerprint}, ${key.source === "SECRETS_KEY" ? "SECRETS_KEY" : "file"})
    on conflict (id) do nothing`
  )
  const now = yield* readRecorded
  if (now === undefined)
    return yield* Effect.die(new Error("service.secrets_key is empty after recording the secrets key's fingerprint"))
  if (now.fingerprint !== fingerprint) return yield* refuse(key, differs(key, now))
  return accepted(inserted.count === 1, undecryptable)
})

const accepted = (recorded: boolean, undecryptable: ReadonlyArray<string>): KeyCheck => ({
  ok: true,
  recorded,
  undecryptable
})
