// The admin CLI checks receivers with its own environment: a refusal the service's settings
// would allow names the setting to give the CLI too.
import { afterEach, describe, expect, it } from "vitest"
import { hintFor } from "../../../src/faces/cli/main.ts"

const saved = { networks: process.env.WEBHOOK_ALLOWED_NETWORKS, ca: process.env.NODE_EXTRA_CA_CERTS }
afterEach(() => {
  for (const [k, v] of [["WEBHOOK_ALLOWED_NETWORKS", saved.networks], ["NODE_EXTRA_CA_CERTS", saved.ca]] as const) {
    if (v === undefined) delete process.env[k]
    else process.env[k] = v
  }
})

describe("hints on refusals", () => {
  it("a private address, with no allowed networks, points at WEBHOOK_ALLOWED_NETWORKS", () => {
    delete process.env.WEBHOOK_ALLOWED_NETWORKS
    for (const message of [
      "url refused: localhost resolves to 127.0.0.1 (loopback)",
      "the receiver did not accept the test event (refused: 10.0.0.1 is not a public address (private))"
    ]) {
      expect(hintFor(message)).toMatch(/^\nhint: .*WEBHOOK_ALLOWED_NETWORKS/)
    }
    process.env.WEBHOOK_ALLOWED_NETWORKS = "127.0.0.0/8"
    expect(hintFor("url refused: localhost resolves to 10.1.1.1 (private)")).toBe("")
  })
  it("a TLS failure, with no extra CA, points at NODE_EXTRA_CA_CERTS; other failures get no hint", () => {
    delete process.env.NODE_EXTRA_CA_CERTS
    expect(hintFor("the receiver did not accept the test event (tls: unable to verify the first certificate (UNABLE_TO_VERIFY_LEAF_SIGNATURE))")).toMatch(/NODE_EXTRA_CA_CERTS/)
    expect(hintFor("the receiver did not accept the test event (http 503)")).toBe("")
    expect(hintFor("refused: only https:// addresses are accepted (got http://)")).toBe("")
  })
})
