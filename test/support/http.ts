// Shared by the API tests: keys made through the real admin operations, requests over real
// HTTP, and a check of every response against the served OpenAPI document.
import { Effect, Exit, Layer, Scope } from "effect"
import { Agent, request as httpRequest, type IncomingMessage } from "node:http"
import { Ajv2020 } from "ajv/dist/2020.js"
import SwaggerParser from "@apidevtools/swagger-parser"
import { createKey, revokeKey, type Expiry } from "../../src/access/keys/store.ts"
import { createToken } from "../../src/access/tokens.ts"
import { Database } from "../../src/platform/db/Database.ts"
import { Sql } from "../../src/platform/db/Sql.ts"
import { ApiPool } from "../../src/platform/db/api-pool.ts"
import { ApiSettings } from "../../src/platform/api-settings.ts"
import { ApiKeys } from "../../src/access/keys/service.ts"
import { Views } from "../../src/read/views.ts"
import { RESOURCES, type Resource } from "../../src/domain/resources.ts"
import type { TestDatabase } from "./db.ts"
import type { TestCompany } from "./views.ts"

/** The Database and its Sql over a test database's pool. */
export const provideDb = (db: TestDatabase) =>
  Layer.merge(Layer.succeed(Database, { sql: db.sql, url: db.url, embedded: false }), Sql.fromPool(db.sql))

/** The read service (Views) with its pool on the test database, kept until `close`. */
export const startViews = async (db: TestDatabase) => {
  const layer = Views.layer.pipe(
    Layer.provideMerge(ApiKeys.layer),
    Layer.provideMerge(ApiPool.layer),
    Layer.provide(ApiSettings.layer({})),
    Layer.provide(provideDb(db))
  )
  const scope = Effect.runSync(Scope.make())
  const context = await Effect.runPromise(Layer.buildWithScope(layer, scope))
  return {
    run: <A, E>(effect: Effect.Effect<A, E, Views>): Promise<A> => Effect.runPromise(Effect.provide(effect, context)),
    close: (): Promise<void> => Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

export interface KeyOptions {
  readonly scopes?: ReadonlyArray<Resource>
  readonly webhooks?: boolean
  readonly expires?: Expiry
  readonly name?: string
}

/** A key made the way an admin makes one; returns its id and the key itself. */
export const makeKey = async (db: TestDatabase, company: TestCompany, options: KeyOptions = {}) => {
  const created = await Effect.runPromise(
    createKey(
      { userId: company.adminId, email: company.adminEmail, name: "Ada Admin", companyId: company.id },
      {
        companyId: company.id,
        name: options.name ?? "test key",
        scopes: options.scopes ?? RESOURCES,
        webhooks: options.webhooks ?? false,
        expires: options.expires ?? "never"
      }
    ).pipe(Effect.provide(provideDb(db)))
  )
  return { id: created.id, key: created.key }
}

/** Revokes a key as the company's admin (Ada), as `keys revoke` does. */
export const revokeKeyAs = (db: TestDatabase, company: TestCompany, keyId: string) =>
  Effect.runPromise(
    revokeKey({ userId: company.adminId, email: company.adminEmail, name: "Ada", companyId: company.id }, keyId).pipe(
      Effect.provide(provideDb(db))
    )
  )

/** An admin token for the company's admin (Ada Admin), made as `tokens create` makes one, for 90 days. */
export const makeToken = (db: TestDatabase, company: TestCompany, name: string) =>
  Effect.runPromise(
    createToken(
      { userId: company.adminId, email: company.adminEmail, name: "Ada Admin", companyId: company.id },
      { name, expires: "90d" }
    ).pipe(Effect.provide(provideDb(db)))
  )

export interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly text: string
  readonly json: any
}

/** The whole body of an answer, as text. */
export const bodyText = (res: IncomingMessage) =>
  new Promise<string>((resolve, reject) => {
    const chunks: Array<Buffer> = []
    res.on("data", (c: Buffer) => chunks.push(c))
    res.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
    res.on("error", reject)
  })

/** One HTTP request with node:http (fetch may not set Host). */
export const request = (
  base: string,
  path: string,
  options: {
    readonly key?: string
    readonly method?: string
    readonly headers?: Record<string, string>
    readonly body?: string
    /** The loopback address to send from (127.0.0.2 is another client than 127.0.0.1). */
    readonly localAddress?: string
  } = {}
): Promise<Answer> =>
  new Promise((resolve, reject) => {
    const url = new URL(base)
    const headers: Record<string, string> = { ...options.headers }
    if (options.key !== undefined) headers["authorization"] = `Bearer ${options.key}`
    if (options.body !== undefined && headers["content-type"] === undefined)
      headers["content-type"] = "application/json"
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        path,
        method: options.method ?? "GET",
        headers,
        agent: keepAlive,
        ...(options.localAddress === undefined ? {} : { localAddress: options.localAddress })
      },
      (res) => {
        bodyText(res).then((text) => {
          let json: any
          try {
            json = text === "" ? undefined : JSON.parse(text)
          } catch {
            json = undefined
          }
          const h = new Headers()
          for (const [k, v] of Object.entries(res.headers)) {
            if (v !== undefined) h.set(k, Array.isArray(v) ? v.join(", ") : v)
          }
          resolve({ status: res.statusCode ?? 0, headers: h, text, json })
        }, reject)
      }
    )
    req.on("error", reject)
    if (options.body !== undefined) req.write(options.body)
    req.end()
  })

export type Call = (
  method: string,
  path: string,
  options?: { readonly token?: string | undefined; readonly body?: unknown; readonly base?: string }
) => Promise<Answer>

/** A server: the running one (read when called), or a function giving its address. */
type Server = { readonly url: string } | (() => string)
const urlOf = (server: Server) => (typeof server === "function" ? server() : server.url)

/**
 * The one JSON `call` of the API tests, bound to a server and its document (read when
 * called, as both are made in beforeAll). Each call is made as an API client makes it: a
 * bearer credential (API key or admin token), a JSON body (a string is sent as it is); and
 * each answer gets the same checks: an error is exactly {"error": string}, and the answer
 * is one the OpenAPI document describes.
 */
export const caller =
  (server: Server, checker: () => OpenApiChecker): Call =>
  async (method, path, options = {}) => {
    const answer = await request(options.base ?? urlOf(server), path, {
      method,
      ...(options.token === undefined ? {} : { key: options.token }),
      ...(options.body === undefined
        ? {}
        : { body: typeof options.body === "string" ? options.body : JSON.stringify(options.body) })
    })
    if (answer.status >= 400) {
      if (typeof answer.json?.error !== "string" || Object.keys(answer.json).length !== 1) {
        throw new Error(`${method} ${path} ${answer.status}: not an {"error"} body: ${answer.text}`)
      }
    }
    checker().check(method, path, answer)
    return answer
  }

/**
 * A read-API request with an API key (a JSON body when given), as an integrator sends it; its
 * answer is checked against the document, whatever the status.
 */
export const keyCaller =
  (server: Server, checker: () => OpenApiChecker) =>
  async (method: string, path: string, key: string, body?: unknown): Promise<Answer> => {
    const a = await request(urlOf(server), path, {
      key,
      method,
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    checker().check(method, path, a)
    return a
  }

const keepAlive = new Agent({ keepAlive: false, maxSockets: 64 })

// -----------------------------------------------------------------------------
// OpenAPI conformance

interface Operation {
  readonly re: RegExp
  readonly method: string
  readonly template: string
  readonly responses: Record<string, { content?: Record<string, { schema?: unknown }> }>
}

export interface OpenApiChecker {
  readonly document: any
  /** Fails unless the answer is one the document describes for this method and path. */
  readonly check: (method: string, path: string, answer: Answer) => void
  /** How many answers were checked, per "METHOD template status". */
  readonly seen: Map<string, number>
}

export const openApiChecker = async (document: unknown): Promise<OpenApiChecker> => {
  // validate() dereferences in place: keep the served copy for the schema checks.
  await SwaggerParser.validate(structuredClone(document) as any)
  const doc = document as any
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false })
  ajv.addSchema({ $id: "openapi.json", components: doc.components }, "openapi.json")
  const operations: Array<Operation> = []
  for (const [template, item] of Object.entries<any>(doc.paths)) {
    const re = new RegExp(`^${template.replace(/\{[^}]+\}/g, "[^/]+")}$`)
    for (const [method, op] of Object.entries<any>(item)) {
      operations.push({ re, method: method.toUpperCase(), template, responses: op.responses })
    }
  }
  const cache = new Map<string, ReturnType<typeof ajv.compile>>()
  const rewriteRefs = (schema: unknown): unknown =>
    JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"openapi.json#/components/'))
  const seen = new Map<string, number>()
  return {
    document: doc,
    seen,
    check: (method, path, answer) => {
      const bare = path.split("?")[0]!
      const op = operations.find((o) => o.method === method && o.re.test(bare))
      if (op === undefined) throw new Error(`${method} ${bare} is not in the OpenAPI document`)
      const response = op.responses[String(answer.status)]
      if (response === undefined)
        throw new Error(`${method} ${op.template}: status ${answer.status} is not documented (${answer.text})`)
      const content = response.content?.["application/json"]
      if (content?.schema === undefined) {
        if (answer.text !== "") throw new Error(`${method} ${op.template} ${answer.status}: expected no body`)
      } else {
        if (!(answer.headers.get("content-type") ?? "").startsWith("application/json")) {
          throw new Error(
            `${method} ${op.template} ${answer.status}: content-type ${answer.headers.get("content-type")}`
          )
        }
        const key = `${method} ${op.template} ${answer.status}`
        let validate = cache.get(key)
        if (validate === undefined) {
          validate = ajv.compile(rewriteRefs(content.schema) as object)
          cache.set(key, validate)
        }
        if (!validate(answer.json)) {
          throw new Error(
            `${key} does not match the document: ${ajv.errorsText(validate.errors)}\n${answer.text.slice(0, 2000)}`
          )
        }
      }
      const k = `${method} ${op.template} ${answer.status}`
      seen.set(k, (seen.get(k) ?? 0) + 1)
    }
  }
}

// -----------------------------------------------------------------------------
// A client that checks every answer: against the OpenAPI document when the operation is
// documented, the error shape otherwise, no NEVER marker anywhere, and the RateLimit
// fields whenever a key was sent.

export interface CheckedClient {
  readonly get: (
    path: string,
    options?: { readonly key?: string; readonly host?: string; readonly method?: string }
  ) => Promise<Answer>
  readonly answers: Array<{ readonly method: string; readonly path: string; readonly status: number }>
}

/** The checks every answer gets: the document, the error shape, no NEVER marker, the RateLimit fields when a key was sent. */
const checkAnswer = (
  checker: OpenApiChecker,
  neverMark: string,
  method: string,
  path: string,
  answer: Answer,
  keyed: boolean
) => {
  if (answer.text.includes(neverMark))
    throw new Error(`${method} ${path}: the answer carries never-sent data: ${answer.text.slice(0, 500)}`)
  if (answer.status >= 400) {
    // The stream's refetch signal adds its two fields (docs/integrators.md#following-the-stream).
    const fields = answer.status === 409 && answer.json?.mustRefetch === true ? 3 : 1
    if (typeof answer.json?.error !== "string" || Object.keys(answer.json).length !== fields) {
      throw new Error(`${method} ${path} ${answer.status}: not an {"error"} body: ${answer.text}`)
    }
  }
  const bare = path.split("?")[0]!
  const known = Object.keys(checker.document.paths).some((t) =>
    new RegExp(`^${t.replace(/\{[^}]+\}/g, "[^/]+")}$`).test(bare)
  )
  if (known && answer.status !== 405 && method !== "HEAD") checker.check(method, path, answer)
  if (keyed && bare.startsWith("/api/v1") && known && answer.status !== 405) {
    if (answer.headers.get("ratelimit-policy") === null)
      throw new Error(`${method} ${path} ${answer.status}: no RateLimit-Policy`)
    if (answer.status !== 401 && !/^"default";r=\d+;t=\d+$/.test(answer.headers.get("ratelimit") ?? "")) {
      throw new Error(`${method} ${path} ${answer.status}: RateLimit is ${answer.headers.get("ratelimit")}`)
    }
  }
}

export const checkedClient = (base: string, checker: OpenApiChecker, neverMark: string): CheckedClient => {
  const answers: Array<{ method: string; path: string; status: number }> = []
  const get: CheckedClient["get"] = async (path, options = {}) => {
    const method = options.method ?? "GET"
    const answer = await request(base, path, {
      ...(options.key === undefined ? {} : { key: options.key }),
      method,
      headers: options.host === undefined ? {} : { host: options.host }
    })
    answers.push({ method, path, status: answer.status })
    checkAnswer(checker, neverMark, method, path, answer, options.key !== undefined)
    return answer
  }
  return { get, answers }
}

// -----------------------------------------------------------------------------
// The same checks for the typed client (client/): a fetch to give it.

export interface CheckedFetch {
  readonly fetch: typeof globalThis.fetch
  /** Every answer, in order. */
  readonly answers: Array<{ readonly method: string; readonly path: string; readonly status: number }>
}

/**
 * A fetch for SafetyRecordsClient that checks every answer as checkedClient does (against
 * the served document, the error shape, no NEVER marker, the RateLimit fields), and notes it.
 */
export const checkedFetch = (checker: OpenApiChecker, neverMark: string): CheckedFetch => {
  const answers: Array<{ method: string; path: string; status: number }> = []
  const checked: typeof globalThis.fetch = async (input, init) => {
    const req = new Request(input, init)
    const response = await fetch(req)
    const text = await response.text()
    let json: any
    try {
      json = text === "" ? undefined : JSON.parse(text)
    } catch {
      json = undefined
    }
    const url = new URL(req.url)
    const path = url.pathname + url.search
    answers.push({ method: req.method, path, status: response.status })
    checkAnswer(
      checker,
      neverMark,
      req.method,
      path,
      { status: response.status, headers: response.headers, text, json },
      req.headers.has("authorization")
    )
    // Statuses that carry no body may not be given one.
    const empty = response.status === 204 || response.status === 304
    return new Response(empty ? null : text, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers
    })
  }
  return { fetch: checked, answers }
}
