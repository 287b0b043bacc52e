import { createHmac } from "node:crypto"
import { Webhook as StandardWebhook } from "standardwebhooks"
import Stripe from "stripe"
import { Webhook as SvixWebhook } from "svix"
import { describe, expect, it } from "vitest"
import { newSecret, sign, signedHeaders, standardHeaders, verify } from "../../src/delivery/signature.ts"

const body = JSON.stringify({ id: "dlv_1", event: "incident.created", createdAt: "2026-11-22T00:00:00.000Z", data: { id: "inc_1", note: "café ✓" } })

describe("signature", () => {
  it("is t=<unix>,v1=<lowercase hex HMAC-SHA256 of 't.' + body> keyed with the whole secret", () => {
    const secret = "whsec_test"
    const expected = createHmac("sha256", "whsec_test").update(`1700000000.${body}`).digest("hex")
    expect(sign(secret, 1_700_000_000, body)).toBe(`t=1700000000,v1=${expected}`)
    // Bytes and the string they encode sign the same.
    expect(sign(secret, 1_700_000_000, Buffer.from(body, "utf8"))).toBe(sign(secret, 1_700_000_000, body))
    expect(() => sign(secret, 1.5, body)).toThrow(RangeError)
  })

  it("verifies with the stripe package's constructEvent", () => {
    const secret = newSecret()
    const header = sign(secret, Math.floor(Date.now() / 1000), body)
    const event = Stripe.webhooks.constructEvent(Buffer.from(body), header, secret)
    expect(event).toMatchObject({ id: "dlv_1", event: "incident.created" })
    expect(() => Stripe.webhooks.constructEvent(Buffer.from(body + " "), header, secret)).toThrow()
    expect(() => Stripe.webhooks.constructEvent(Buffer.from(body), header, newSecret())).toThrow()
  })

  it("verify accepts a good signature and explains refusals", () => {
    const secret = newSecret()
    const now = 1_800_000_000
    const header = sign(secret, now, body)
    expect(verify(header, body, secret, 300, now)).toEqual({ ok: true, timestamp: now })
    expect(verify(header, Buffer.from(body), secret, 300, now + 300)).toEqual({ ok: true, timestamp: now })
    expect(verify(header, body, secret, 300, now + 301)).toMatchObject({ ok: false, reason: expect.stringContaining("tolerance") })
    expect(verify(header, body, secret, 300, now - 301)).toMatchObject({ ok: false, reason: expect.stringContaining("tolerance") })
    expect(verify(header, body.replace("café", "cafe"), secret, 300, now)).toEqual({ ok: false, reason: "signature does not match" })
    expect(verify(header, body, `${secret}x`, 300, now)).toEqual({ ok: false, reason: "signature does not match" })
    expect(verify(`v1=${header.split("v1=")[1]}`, body, secret, 300, now)).toMatchObject({ ok: false, reason: expect.stringContaining("timestamp") })
    expect(verify(`t=${now}`, body, secret, 300, now)).toMatchObject({ ok: false, reason: expect.stringContaining("no v1") })
    expect(verify(`t=${now},v1=abc`, body, secret, 300, now)).toEqual({ ok: false, reason: "signature does not match" })
    // Several v1 values (as during a key rotation elsewhere): any match is accepted.
    expect(verify(`t=${now},v1=${"0".repeat(64)},${header.split(",")[1]}`, body, secret, 300, now)).toMatchObject({ ok: true })
  })

  it("makes Stripe-style secrets: whsec_ + base64 of 32 random bytes", () => {
    const a = newSecret()
    expect(a).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/)
    expect(Buffer.from(a.slice(6), "base64")).toHaveLength(32)
    expect(newSecret()).not.toBe(a)
  })

  it("Standard Webhooks: v1,<base64 HMAC-SHA256 of 'id.timestamp.' + body> keyed with the base64 after whsec_, as the libraries sign", () => {
    const secret = newSecret()
    const key = Buffer.from(secret.slice(6), "base64")
    const expected = createHmac("sha256", key).update(`dlv_1.1700000000.${body}`).digest("base64")
    const headers = standardHeaders(secret, "dlv_1", 1_700_000_000, body)
    expect(headers).toEqual({ "webhook-id": "dlv_1", "webhook-timestamp": "1700000000", "webhook-signature": `v1,${expected}` })
    expect(standardHeaders(secret, "dlv_1", 1_700_000_000, Buffer.from(body, "utf8"))).toEqual(headers)
    const at = new Date(1_700_000_000_000)
    expect(headers["webhook-signature"]).toBe(new StandardWebhook(secret).sign("dlv_1", at, body))
    expect(headers["webhook-signature"]).toBe(new SvixWebhook(secret).sign("dlv_1", at, body))
    // Verifiable now by both libraries.
    const now = standardHeaders(secret, "dlv_2", Math.floor(Date.now() / 1000), body)
    expect(new StandardWebhook(secret).verify(body, now)).toMatchObject({ id: "dlv_1", event: "incident.created" })
    expect(() => new SvixWebhook(secret).verify(body, now)).not.toThrow()
    expect(() => standardHeaders(secret, "dlv_1", 1.5, body)).toThrow(RangeError)
  })

  it("a delivery's headers (keys made once per secret) are both schemes' signatures, for every secret and body", () => {
    const secrets = [newSecret(), newSecret(), "whsec_", "not-whsec-prefixed"]
    for (let round = 0; round < 3; round++) {
      for (const [i, secret] of secrets.entries()) {
        const t = 1_700_000_000 + round * 7 + i
        const b = `${body}${round}`
        const headers = signedHeaders(secret, `dlv_${i}`, t, b)
        expect(headers).toEqual({ "service-delivery": `dlv_${i}`, "service-signature": sign(secret, t, b), ...standardHeaders(secret, `dlv_${i}`, t, b) })
        expect(signedHeaders(secret, `dlv_${i}`, t, Buffer.from(b, "utf8"))).toEqual(headers)
        expect(verify(headers["service-signature"]!, b, secret, 300, t)).toEqual({ ok: true, timestamp: t })
      }
    }
    expect(signedHeaders(secrets[0]!, "a", 1, body)["service-signature"]).not.toBe(signedHeaders(secrets[1]!, "a", 1, body)["service-signature"])
    expect(() => signedHeaders(secrets[0]!, "dlv_1", -1, body)).toThrow(RangeError)
  })
})
