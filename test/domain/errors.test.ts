// The one error model and its two wordings: HTTP (status and {"error": message}, the same
// whether HttpApi encodes it or the fallback answers it) and the CLI (a field's flag, a hint
// by reason). Table tests, pure.
import { Schema } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import {
  at,
  conflict,
  forbidden,
  invalid,
  notFound,
  rateLimited,
  unauthorized,
  words,
  type DomainError
} from "../../src/domain/errors.ts"
import { checkName, parseScopes } from "../../src/access/keys/store.ts"
import {
  BadRequest,
  Conflict,
  errorAnswer,
  Forbidden,
  httpMessage,
  httpStatus,
  MethodNotAllowed,
  NotFound,
  PayloadTooLarge,
  ServerFailure,
  TooManyRequests,
  Unauthorized
} from "../../src/faces/http/errors.ts"
import { cliError, cliMessage, flagOf } from "../../src/faces/cli/errors.ts"

const saved = process.env.WEBHOOK_ALLOWED_NETWORKS
afterEach(() => {
  if (saved === undefined) delete process.env.WEBHOOK_ALLOWED_NETWORKS
  else process.env.WEBHOOK_ALLOWED_NETWORKS = saved
})

const scopesError = (input: string): DomainError => {
  const r = parseScopes(input)
  if (!("error" in r)) throw new Error(`expected ${input} to be refused`)
  return r.error
}

describe("domain errors", () => {
  it.each<[string, DomainError, string, string | undefined]>([
    ["a marked field", invalid(words`${at("name")} must not be empty`), "name must not be empty", "name"],
    [
      "a field given",
      invalid("url must be an https:// address", { field: "url" }),
      "url must be an https:// address",
      "url"
    ],
    [
      "the first field named",
      invalid(words`${at("since")} and ${at("until")} must be dates`),
      "since and until must be dates",
      "since"
    ],
    ["no field", notFound("no endpoint 1"), "no endpoint 1", undefined]
  ])("%s: domain words and the field", (_, e, message, field) => {
    expect([e.message, e.field]).toEqual([message, field])
  })
})

describe("HTTP: one status per kind, the body's message with the API's names", () => {
  it.each<[DomainError, number, Schema.Top, string]>([
    [invalid(words`${at("name")} must not be empty`), 400, BadRequest, "name must not be empty"],
    [unauthorized("this key is revoked or expired"), 401, Unauthorized, "this key is revoked or expired"],
    [
      forbidden("this key does not have the webhooks permission"),
      403,
      Forbidden,
      "this key does not have the webhooks permission"
    ],
    [notFound("no API key with id x"), 404, NotFound, "no API key with id x"],
    [conflict("replay r is done already"), 409, Conflict, "replay r is done already"],
    [rateLimited("rate limit exceeded: 2 requests per 60 seconds"), 429, TooManyRequests, "rate limit exceeded: 2"],
    [scopesError("incidents,nope"), 400, BadRequest, 'unknown resource "nope" in read; choose from'],
    [scopesError(""), 400, BadRequest, "read needs resources separated by commas, or all"],
    [
      invalid(words`name one destination: ${at("endpoint")} or ${at("subscription")}`),
      400,
      BadRequest,
      "name one destination: endpointId or subscriptionId"
    ],
    [invalid(words`${at("since")} must be a date`), 400, BadRequest, "since must be a date"]
  ])("%s", (e, status, answer, message) => {
    expect(httpStatus(e)).toBe(status)
    // What HttpApi sends when a handler fails with it (the endpoint declares `answer`) ...
    const body = Schema.encodeUnknownSync(answer as Schema.Codec<unknown, { readonly error: string }>)(e)
    expect(Object.keys(body)).toEqual(["error"])
    expect(body.error.startsWith(message)).toBe(true)
    expect(httpMessage(e)).toBe(body.error)
    expect(body.error).not.toContain("--")
    // ... and what the fallback sends: the same status and body.
    const response = errorAnswer(e)
    expect(response.status).toBe(status)
    expect(answerText(response)).toBe(JSON.stringify(body))
  })

  it("an answer declared for one kind does not take another (the endpoint's declarations are what it answers)", () => {
    expect(() => Schema.encodeUnknownSync(BadRequest)(notFound("no such thing"))).toThrow()
    expect(() => Schema.encodeUnknownSync(Unauthorized)(forbidden("not this"))).toThrow()
  })

  it.each([
    [new MethodNotAllowed({ message: "DELETE is not allowed on /api/v1; it takes GET, HEAD" }), 405],
    [new PayloadTooLarge({ message: "the request body is too large: at most 64 KiB" }), 413],
    [new ServerFailure({ status: 503, message: "the service is shutting down" }), 503]
  ])("HTTP's own refusals: %s", (e, status) => {
    const response = errorAnswer(e, { allow: "GET" })
    expect([response.status, response.headers.allow]).toEqual([status, "GET"])
    expect(JSON.parse(answerText(response))).toEqual({ error: e.message })
  })
})

/** The text of an answer made in memory. */
const answerText = (response: ReturnType<typeof errorAnswer>): string => {
  if (response.body._tag !== "Uint8Array") throw new Error(`a ${response.body._tag} body`)
  return new TextDecoder().decode(response.body.body)
}

describe("CLI: the flag for a field, the message otherwise as it is", () => {
  it.each([
    ["name", "--name"],
    ["scopes", "--read"],
    ["admin", "--as"],
    ["company", "--company"],
    ["forwardTo", "--forward-to"],
    ["apiKey", "--api-key"],
    ["endpoint", "--endpoint <id>"]
  ])("field %s is %s", (field, flag) => expect(flagOf(field)).toBe(flag))

  it.each<[DomainError, string]>([
    [checkName("  ")!, "error: --name must not be empty"],
    [checkName("x".repeat(101))!, "error: --name must be at most 100 characters"],
    [scopesError("all,incidents"), "error: --read takes all on its own, or a list of resources"],
    [
      invalid(words`${at("admin")} must be an e-mail address, not "x"`),
      'error: --as must be an e-mail address, not "x"'
    ],
    [
      invalid(words`${at("since")} (a) must be before ${at("until")} (b)`),
      "error: --since (a) must be before --until (b)"
    ],
    // A field carried but not named in the words: the text is the domain's (pinned CLI texts).
    [invalid("overlap may be at most 7d", { field: "overlap" }), "error: overlap may be at most 7d"],
    [notFound("no user with e-mail a@b.c"), "error: no user with e-mail a@b.c"]
  ])("%s", (e, line) => {
    delete process.env.WEBHOOK_ALLOWED_NETWORKS
    expect(cliError(e)).toBe(line)
  })

  it("unknown resources name the flag where the message names the field", () => {
    expect(cliMessage(scopesError("incidents,nope"))).toMatch(
      /^unknown resource "nope" in --read; choose from incidents, .*, or all$/
    )
  })

  it("a reason adds its hint after the message", () => {
    delete process.env.WEBHOOK_ALLOWED_NETWORKS
    const e = invalid("url refused: localhost resolves to a private or special address", {
      field: "url",
      reason: "address_not_public"
    })
    expect(cliError(e)).toMatch(
      /^error: url refused: localhost resolves to a private or special address\nhint: .*WEBHOOK_ALLOWED_NETWORKS/
    )
  })
})
