// The admin CLI checks receivers with its own environment: a refusal the service's settings
// would allow names the setting to give the CLI too. The hint follows the error's reason,
// which the receiver checks set; the message's text plays no part.
import { Effect } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { parseAllowedNetworksOrThrow, type Lookup } from "../../../src/webhooks/net/address-guard.ts"
import { isDomainError, invalid, type DomainError } from "../../../src/domain/errors.ts"
import { hintFor } from "../../../src/faces/cli/errors.ts"
import { checkUrl } from "../../../src/webhooks/endpoints/validate.ts"

const saved = { networks: process.env.WEBHOOK_ALLOWED_NETWORKS, ca: process.env.NODE_EXTRA_CA_CERTS }
afterEach(() => {
  for (const [k, v] of [
    ["WEBHOOK_ALLOWED_NETWORKS", saved.networks],
    ["NODE_EXTRA_CA_CERTS", saved.ca]
  ] as const) {
    if (v === undefined) delete process.env[k]
    else process.env[k] = v
  }
})

const lookup: Lookup = async (host) => [{ address: host === "localhost" ? "127.0.0.1" : "93.184.215.14", family: 4 }]

/** The error checking a receiver's url fails with. */
const urlRefusal = async (url: string): Promise<DomainError> => {
  try {
    await Effect.runPromise(checkUrl({ allowed: parseAllowedNetworksOrThrow(""), lookup }, url))
  } catch (e) {
    if (isDomainError(e)) return e
    throw e
  }
  throw new Error(`expected ${url} to be refused`)
}

describe("hints on refusals", () => {
  it("a private address, with no allowed networks, points at WEBHOOK_ALLOWED_NETWORKS", async () => {
    delete process.env.WEBHOOK_ALLOWED_NETWORKS
    for (const url of ["https://localhost/hooks", "https://10.0.0.1/hooks"]) {
      const e = await urlRefusal(url)
      expect([e.field, e.reason], url).toEqual(["url", "address_not_public"])
      expect(hintFor(e)).toMatch(/^\nhint: .*WEBHOOK_ALLOWED_NETWORKS/)
    }
    // A failed test event to such an address (the CLI's CheckFailed) carries the same reason.
    expect(
      hintFor({
        message: "the receiver did not accept the test event (refused: 10.0.0.1 is not a public address (private))",
        reason: "address_not_public"
      })
    ).toMatch(/^\nhint: .*WEBHOOK_ALLOWED_NETWORKS/)
    process.env.WEBHOOK_ALLOWED_NETWORKS = "127.0.0.0/8"
    expect(hintFor(await urlRefusal("https://localhost/hooks"))).toBe("")
  })
  it("a TLS failure, with no extra CA, points at NODE_EXTRA_CA_CERTS; other failures get no hint", async () => {
    delete process.env.NODE_EXTRA_CA_CERTS
    delete process.env.WEBHOOK_ALLOWED_NETWORKS
    expect(
      hintFor({
        message:
          "the receiver did not accept the test event (tls: unable to verify the first certificate (UNABLE_TO_VERIFY_LEAF_SIGNATURE))",
        reason: "tls"
      })
    ).toMatch(/NODE_EXTRA_CA_CERTS/)
    expect(hintFor({ message: "the receiver did not accept the test event (http 503)" })).toBe("")
    const http = await urlRefusal("http://hooks.example.com/")
    expect(http.message).toBe("url refused: only https:// addresses are accepted (got http://)")
    expect([http.reason, hintFor(http)]).toEqual([undefined, ""])
    // Text that reads like a refusal chooses nothing: only the reason does.
    expect(hintFor(invalid("url refused: localhost resolves to a private or special address", { field: "url" }))).toBe(
      ""
    )
  })
})
