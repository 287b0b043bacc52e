// What the JSON APIs (/api/v1 and /admin/v1) refuse before any handler reads the request,
// through real HTTP to the real server: bodies over 64 KiB, NUL characters in parameters and
// bodies, two Authorization headers, parameters and fields a path does not take; and what
// must not be mistaken for something else (a long id is no record, not a wrong method).
// Every refusal is a JSON {"error"} and changes nothing.
import { request as httpRequest } from "node:http"
import { beforeAll, describe, expect, it } from "vitest"
import { RESOURCES } from "../../../src/domain/resources.ts"
import { createCompany, updateCompany, type TestCompany } from "../../support/views.ts"
import { runCli } from "../../support/cli.ts"
import { bodyText, makeKey, revokeKeyAs } from "../../support/http.ts"
import { LOOPBACK_WEBHOOKS, useDatabase, useServer } from "../../support/fixtures.ts"
import { SERVED_ROUTES } from "../../../src/faces/routes.ts"

type Raw = { status: number; headers: Record<string, string | string[] | undefined>; json: any }

/** One request with headers given raw (repeats allowed) and the body sent with a length or chunked. */
const raw = (
  base: string,
  method: string,
  path: string,
  headers: ReadonlyArray<string>,
  body?: string,
  chunked = false
) =>
  new Promise<Raw>((resolve, reject) => {
    const url = new URL(base)
    const all = ["host", url.host, ...headers]
    if (body !== undefined)
      all.push(
        "content-type",
        "application/json",
        ...(chunked ? ["transfer-encoding", "chunked"] : ["content-length", String(Buffer.byteLength(body))])
      )
    const req = httpRequest({ host: url.hostname, port: url.port, method, path, headers: all }, (res) => {
      bodyText(res).then((text) => {
        let json: unknown
        try {
          json = JSON.parse(text)
        } catch {
          json = { unparsed: text }
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, json })
      }, reject)
    })
    req.on("error", reject)
    if (body !== undefined && chunked) {
      // In pieces, as a streaming client sends it.
      for (let i = 0; i < body.length; i += 8192) req.write(body.slice(i, i + 8192))
      req.end()
    } else req.end(body)
  })

describe("requests the JSON APIs refuse up front", () => {
  const db = useDatabase()
  const server = useServer(db, { rateLimit: 1_000_000 }, LOOPBACK_WEBHOOKS)
  let acme: TestCompany
  let key: string
  let keyId: string
  let revoked: string
  let token: string
  const bearer = (k: string) => ["authorization", `Bearer ${k}`]
  const call = (method: string, path: string, credential: string, body?: string, chunked = false) =>
    raw(server.url, method, path, bearer(credential), body, chunked)
  const postHook = (url: string, event: string, chunked = false) =>
    call("POST", "/api/v1/hooks", key, JSON.stringify({ url, event }), chunked)
  const counts = async () => {
    const [r] = await db.sql<{ keys: number; subs: number; endpoints: number }[]>`
      select (select count(*) from service.api_keys)::int as keys, (select count(*) from service.webhook_subscriptions)::int as subs,
        (select count(*) from service.webhook_endpoints)::int as endpoints`
    return r!
  }
  const refused = (a: Raw, status: number, error: string | RegExp) => {
    expect(a.status, JSON.stringify(a.json)).toBe(status)
    expect(Object.keys(a.json)).toEqual(["error"])
    if (typeof error === "string") expect(a.json.error).toBe(error)
    else expect(a.json.error).toMatch(error)
  }
  /** Each request [method, path, credential, the error, body] is refused with `status`. */
  const allRefused = async (
    status: number,
    requests: ReadonlyArray<readonly [string, string, string, string | RegExp, string?]>
  ) => {
    for (const [method, path, credential, error, body] of requests)
      refused(await call(method, path, credential, body), status, error)
  }

  beforeAll(async () => {
    acme = await createCompany(db.sql, { name: "Acme" })
    ;({ key, id: keyId } = await makeKey(db, acme, { webhooks: true, name: "full" }))
    const gone = await makeKey(db, acme, { name: "gone" })
    revoked = gone.key
    await revokeKeyAs(db, acme, gone.id)
    const r = await runCli(["tokens", "create", "--as", acme.adminEmail, "--name", "checks", "--json"], {
      DATABASE_URL: db.url
    })
    expect(r.code).toBe(0)
    token = JSON.parse(r.stdout).token
  })

  it("413 for a body over 64 KiB, sent with a length or chunked; nothing is made", async () => {
    const before = await counts()
    const big = JSON.stringify({ name: "big", read: "all", x: "a".repeat(70_000) })
    const tooLarge = "the request body is too large: at most 64 KiB"
    refused(await call("POST", "/admin/v1/keys", token, big), 413, tooLarge)
    refused(await call("POST", "/admin/v1/keys", token, big, true), 413, tooLarge)
    const hook = JSON.stringify({ url: `https://127.0.0.1:9/${"a".repeat(70_000)}`, event: "incident.created" })
    refused(await call("POST", "/api/v1/hooks", key, hook), 413, tooLarge)
    refused(await call("POST", "/api/v1/hooks", key, hook, true), 413, tooLarge)
    expect(await counts()).toEqual(before)
    // Under the bound, a chunked body is read as usual.
    const small = await postHook("https://127.0.0.1:9/chunked", "incident.created", true)
    expect(small.status).toBe(201)
    expect((await counts()).subs).toBe(before.subs + 1)
  })

  it("400 for a NUL character in a query parameter or anywhere in a JSON body; nothing is made", async () => {
    const before = await counts()
    const nulIn = (name: string) => `query parameter "${name}" contains a NUL character (%00)`
    const nulBody = "invalid request body: text may not contain NUL characters (\\u0000)"
    const nulEndpoint = '{"name":"n","url":"https://127.0.0.1:9/x","events":["incident.created"],"\\u0000":1}'
    const nulDeep = `{"url":"https://127.0.0.1:9/deep","event":"incident.created","x":${"[".repeat(20_000)}"\\u0000"${"]".repeat(20_000)}}`
    await allRefused(400, [
      ["GET", "/api/v1/workers?name=%00", key, nulIn("name")],
      ["GET", "/api/v1/job-sites?limit=5&name=a%00b", key, nulIn("name")],
      ["GET", "/admin/v1/activity?kind=%00", token, nulIn("kind")],
      ["POST", "/admin/v1/keys", token, nulBody, '{"name":"a\\u0000b","read":"all"}'],
      ["POST", "/admin/v1/endpoints", token, nulBody, nulEndpoint],
      ["POST", "/api/v1/hooks", key, nulBody, '{"url":"https://127.0.0.1:9/a\\u0000","event":"incident.created"}'],
      ["POST", "/api/v1/hooks", key, nulBody, nulDeep]
    ])
    // Deep nesting without a NUL is an ordinary bad body, not a crash.
    refused(
      await call("POST", "/api/v1/hooks", key, `${"[".repeat(30_000)}${"]".repeat(30_000)}`),
      400,
      /^invalid request body/
    )
    expect(await counts()).toEqual(before)
  })

  it("400 for two Authorization headers, whichever comes first", async () => {
    for (const pair of [
      [key, revoked],
      [revoked, key]
    ]) {
      const a = await raw(server.url, "GET", "/api/v1/incidents?limit=1", [...bearer(pair[0]!), ...bearer(pair[1]!)])
      refused(a, 400, "more than one Authorization header: send exactly one")
    }
    refused(
      await raw(server.url, "GET", "/admin/v1/keys", [...bearer(token), ...bearer(token)]),
      400,
      "more than one Authorization header: send exactly one"
    )
  })

  it("a path that is not valid percent-encoding is a bad request, not a wrong method", async () => {
    refused(
      await call("GET", "/api/v1/incidents/%zz", key),
      400,
      "the path is not valid percent-encoding: /api/v1/incidents/%zz"
    )
    refused(await raw(server.url, "GET", "/api/v1/incidents/%zz", []), 400, /not valid percent-encoding/)
    refused(await call("GET", "/admin/v1/endpoints/%E0%A4%A", token), 400, /not valid percent-encoding/)
    // The admin pages too; and a NUL in a path (no record's id has one) is refused before any handler.
    refused(await raw(server.url, "GET", "/admin/webhooks/endpoints/%E0%A4", []), 400, /not valid percent-encoding/)
    refused(await raw(server.url, "POST", "/admin/keys/%00/revoke", []), 400, "the path contains a NUL character (%00)")
    refused(await call("GET", "/api/v1/incidents/%00", key), 400, "the path contains a NUL character (%00)")
  })

  it("an id of any length is looked up, not taken for a wrong method", async () => {
    const long = "a".repeat(101)
    refused(await call("GET", `/api/v1/incidents/${long}`, key), 404, /^no incidents record with id/)
    refused(await call("GET", `/api/v1/hooks/${long}`, key), 404, /subscription/)
    refused(await call("DELETE", `/api/v1/hooks/${long}`, key), 404, /subscription/)
    refused(await call("GET", `/admin/v1/endpoints/${long}`, token), 404, /endpoint/)
  })

  it("the admin API refuses parameters and fields a path does not take, as the read API does", async () => {
    const before = await counts()
    const excess = 'unknown field "companyId" in the request body: it takes name, read, webhooks, expires'
    const takesNone = (name: string) => `unknown query parameter "${name}"; this path takes none`
    await allRefused(400, [
      ["GET", "/admin/v1/subscriptions?key=abc", token, takesNone("key")],
      ["GET", "/admin/v1/keys?foo=bar", token, takesNone("foo")],
      ["GET", `/admin/v1/endpoints/${keyId}/deliveries?limit=abc`, token, takesNone("limit")],
      ["POST", "/admin/v1/keys", token, excess, JSON.stringify({ name: "xf", read: "all", companyId: acme.id })]
    ])
    expect(await counts()).toEqual(before)
    // Without one, the same requests go through.
    expect((await call("GET", "/admin/v1/subscriptions", token)).status).toBe(200)
  })

  it("hooks: a module that is off is named as the reason; port 0 is no address", async () => {
    await updateCompany(db.sql, acme.id, { modules: ["incidents"] })
    try {
      refused(
        await postHook("https://127.0.0.1:9/pm", "permit.closed"),
        403,
        "the permits module is turned off for this company"
      )
    } finally {
      await updateCompany(db.sql, acme.id, { modules: RESOURCES })
    }
    refused(await postHook("https://127.0.0.1:0/x", "incident.created"), 400, /port 0/)
  })
})

describe("a body field no version of the API knows", () => {
  const db = useDatabase()
  const server = useServer(db, { rateLimit: 1_000_000 }, LOOPBACK_WEBHOOKS)
  let acme: TestCompany
  let key: string
  let token: string

  beforeAll(async () => {
    acme = await createCompany(db.sql, { name: "Acme" })
    ;({ key } = await makeKey(db, acme, { webhooks: true, name: "full" }))
    const r = await runCli(["tokens", "create", "--as", acme.adminEmail, "--name", "fields", "--json"], {
      DATABASE_URL: db.url
    })
    token = JSON.parse(r.stdout).token
  })

  const counts = async () =>
    (
      await db.sql`
      select (select count(*) from service.api_keys)::int as keys, (select count(*) from service.webhook_subscriptions)::int as subs,
        (select count(*) from service.webhook_endpoints)::int as endpoints, (select count(*) from service.activity)::int as activity,
        (select count(*) from service.webhook_replays)::int as replays, (select count(*) from service.admin_tokens)::int as tokens`
    )[0]

  it("is a 400 naming it on every POST of the API and the admin API, and nothing is saved", async () => {
    const posts = SERVED_ROUTES.filter(
      (r) => r.method === "POST" && (r.path.startsWith("/api/v1/") || r.path.startsWith("/admin/v1/"))
    )
    expect(posts.length).toBeGreaterThan(10)
    const before = await counts()
    for (const r of posts) {
      const path = r.path.replace(/:[A-Za-z]+/g, "00000000-0000-4000-8000-000000000000")
      const credential = path.startsWith("/api/") ? key : token
      const a = await raw(
        server.url,
        "POST",
        path,
        ["authorization", `Bearer ${credential}`],
        JSON.stringify({ colour: "blue" })
      )
      expect(a.status, `${r.path}: ${JSON.stringify(a.json)}`).toBe(400)
      expect(a.json.error, r.path).toMatch(/^unknown field "colour" in the request body: /)
    }
    expect(await counts()).toEqual(before)
  })

  it('POST /api/v1/hooks {"url", "event", "payloadMode": "thin"} is refused, naming the field and what it takes', async () => {
    const a = await raw(
      server.url,
      "POST",
      "/api/v1/hooks",
      ["authorization", `Bearer ${key}`],
      JSON.stringify({ url: "https://127.0.0.1:9/x", event: "incident.created", payloadMode: "thin" })
    )
    expect(a.status).toBe(400)
    expect(a.json.error).toBe(
      'unknown field "payloadMode" in the request body: it takes url, event, rateLimit, ordering, filter, payload'
    )
    const [n] = await db.sql<{ n: number }[]>`select count(*)::int as n from service.webhook_subscriptions`
    expect(n!.n).toBe(0)
    // The fields it knows go through.
    const ok = await raw(
      server.url,
      "POST",
      "/api/v1/hooks",
      ["authorization", `Bearer ${key}`],
      JSON.stringify({ url: "https://127.0.0.1:9/x", event: "incident.created", payload: "thin" })
    )
    expect(ok.status, JSON.stringify(ok.json)).toBe(201)
    expect(ok.json.payload).toBe("thin")
  })

  it("a filter the destination may not hold is a 400 naming it, on the API and the admin API, and nothing is saved", async () => {
    const before = await counts()
    const post = (path: string, credential: string, body: unknown) =>
      raw(server.url, "POST", path, ["authorization", `Bearer ${credential}`], JSON.stringify(body))
    const hook = await post("/api/v1/hooks", key, {
      url: "https://127.0.0.1:9/f",
      event: "incident.created",
      filter: { personName: "Sam" }
    })
    expect([hook.status, hook.json.error]).toEqual([
      400,
      'filter: "personName" is withheld from privacy cases: a filter may not read it'
    ])
    const endpoint = await post("/admin/v1/endpoints", token, {
      name: "Pager",
      url: "https://127.0.0.1:9/f",
      events: ["incident.created"],
      filter: { severity: { $regex: "^ser" } }
    })
    expect([endpoint.status, endpoint.json.error]).toEqual([
      400,
      'filter: unknown operator "$regex" on "severity"; operators: $eq $ne $in $nin $gt $gte $lt $lte $exists'
    ])
    const thin = await post("/admin/v1/endpoints", token, {
      name: "Pager",
      url: "https://127.0.0.1:9/f",
      events: ["incident.created"],
      payload: "slim"
    })
    expect(thin.status).toBe(400)
    expect(thin.json.error).toMatch(/payload/)
    expect(await counts()).toEqual(before)
  })
})
