import { createHmac } from "node:crypto"
import { Webhook as StandardWebhook } from "standardwebhooks"
import Stripe from "stripe"
import { Webhook as SvixWebhook } from "svix"
import { describe, expect, it } from "vitest"
import { newSecret, sign, signedHeaders, standardHeaders, verify } from "../../../src/webhooks/net/signature.ts"
import { verifyWebhook } from "../../../client/src/index.ts"

const body = JSON.stringify({
  id: "dlv_1",
  event: "incident.created",
  createdAt: "2026-11-22T00:00:00.000Z",
  data: { id: "inc_1", note: "café ✓" }
})

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
    expect(() => Stripe.webhooks.constructEvent(Buffer.from(`${body} `), header, secret)).toThrow()
    expect(() => Stripe.webhooks.constructEvent(Buffer.from(body), header, newSecret())).toThrow()
  })

  it("verify accepts a good signature and explains refusals", () => {
    const secret = newSecret()
    const now = 1_800_000_000
    const header = sign(secret, now, body)
    expect(verify(header, body, secret, 300, now)).toEqual({ ok: true, timestamp: now })
    expect(verify(header, Buffer.from(body), secret, 300, now + 300)).toEqual({ ok: true, timestamp: now })
    expect(verify(header, body, secret, 300, now + 301)).toMatchObject({
      ok: false,
      reason: expect.stringContaining("tolerance")
    })
    expect(verify(header, body, secret, 300, now - 301)).toMatchObject({
      ok: false,
      reason: expect.stringContaining("tolerance")
    })
    expect(verify(header, body.replace("café", "cafe"), secret, 300, now)).toEqual({
      ok: false,
      reason: "signature does not match"
    })
    expect(verify(header, body, `${secret}x`, 300, now)).toEqual({ ok: false, reason: "signature does not match" })
    expect(verify(`v1=${header.split("v1=")[1]}`, body, secret, 300, now)).toMatchObject({
      ok: false,
      reason: expect.stringContaining("timestamp")
    })
    expect(verify(`t=${now}`, body, secret, 300, now)).toMatchObject({
      ok: false,
      reason: expect.stringContaining("no v1")
    })
    expect(verify(`t=${now},v1=abc`, body, secret, 300, now)).toEqual({ ok: false, reason: "signature does not match" })
    // Several v1 values (as during a key rotation elsewhere): any match is accepted.
    expect(verify(`t=${now},v1=${"0".repeat(64)},${header.split(",")[1]}`, body, secret, 300, now)).toMatchObject({
      ok: true
    })
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
    expect(headers).toEqual({
      "webhook-id": "dlv_1",
      "webhook-timestamp": "1700000000",
      "webhook-signature": `v1,${expected}`
    })
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

  // Rotation with overlap (docs/events.md#secret-rotation): the current secret and the previous one, in that order.
  describe("several secrets", () => {
    const current = newSecret()
    const previous = newSecret()
    const t = 1_700_000_000
    const hex = (secret: string) => createHmac("sha256", secret).update(`${t}.${body}`).digest("hex")
    const b64 = (secret: string) =>
      createHmac("sha256", Buffer.from(secret.slice(6), "base64"))
        .update(`dlv_1.${t}.${body}`)
        .digest("base64")

    it.each([
      ["one secret as a string", current, `t=${t},v1=${hex(current)}`, `v1,${b64(current)}`],
      ["one secret in a list", [current], `t=${t},v1=${hex(current)}`, `v1,${b64(current)}`],
      [
        "current and previous",
        [current, previous],
        `t=${t},v1=${hex(current)},v1=${hex(previous)}`,
        `v1,${b64(current)} v1,${b64(previous)}`
      ],
      [
        "the order given",
        [previous, current],
        `t=${t},v1=${hex(previous)},v1=${hex(current)}`,
        `v1,${b64(previous)} v1,${b64(current)}`
      ]
    ] as const)(
      "%s: Service-Signature and webhook-signature carry one v1 per secret",
      (_name, secrets, service, standard) => {
        expect(sign(secrets, t, body)).toBe(service)
        expect(standardHeaders(secrets, "dlv_1", t, body)["webhook-signature"]).toBe(standard)
        expect(signedHeaders(secrets, "dlv_1", t, body)).toEqual({
          "service-delivery": "dlv_1",
          "service-signature": service,
          "webhook-id": "dlv_1",
          "webhook-timestamp": String(t),
          "webhook-signature": standard
        })
      }
    )

    it("no secret at all is a bug, not an unsigned delivery", () => {
      expect(() => sign([], t, body)).toThrow(RangeError)
      expect(() => standardHeaders([], "dlv_1", t, body)).toThrow(RangeError)
      expect(() => signedHeaders([], "dlv_1", t, body)).toThrow(RangeError)
    })

    it("every verifier accepts the delivery with either secret, and refuses a third", () => {
      const now = Math.floor(Date.now() / 1000)
      const headers = signedHeaders([current, previous], "dlv_1", now, body)
      const other = newSecret()
      for (const [secret, ok] of [
        [current, true],
        [previous, true],
        [other, false]
      ] as const) {
        const standard = () => new StandardWebhook(secret.slice(6)).verify(body, headers)
        const svix = () => new SvixWebhook(secret).verify(body, headers)
        const stripe = () => Stripe.webhooks.constructEvent(Buffer.from(body), headers["service-signature"]!, secret)
        const client = () => verifyWebhook(body, headers, secret)
        const clientStandard = () => verifyWebhook(body, { ...headers, "service-signature": "" }, secret)
        const clientService = () => verifyWebhook(body, { "service-signature": headers["service-signature"]! }, secret)
        for (const check of [standard, svix, stripe, client, clientStandard, clientService]) {
          if (ok) expect(check).not.toThrow()
          else expect(check).toThrow()
        }
        expect(verify(headers["service-signature"]!, body, secret, 300, now)).toEqual(
          ok ? { ok: true, timestamp: now } : { ok: false, reason: "signature does not match" }
        )
      }
      // A changed body verifies with neither.
      for (const secret of [current, previous]) {
        expect(() => new StandardWebhook(secret.slice(6)).verify(`${body} `, headers)).toThrow()
        expect(verify(headers["service-signature"]!, `${body} `, secret, 300, now).ok).toBe(false)
      }
    })
  })

  it("a delivery's headers (keys made once per secret) are both schemes' signatures, for every secret and body", () => {
    const secrets = [newSecret(), newSecret(), "whsec_", "not-whsec-prefixed"]
    for (let round = 0; round < 3; round++) {
      for (const [i, secret] of secrets.entries()) {
        const t = 1_700_000_000 + round * 7 + i
        const b = `${body}${round}`
        const headers = signedHeaders(secret, `dlv_${i}`, t, b)
        expect(headers).toEqual({
          "service-delivery": `dlv_${i}`,
          "service-signature": sign(secret, t, b),
          ...standardHeaders(secret, `dlv_${i}`, t, b)
        })
        expect(signedHeaders(secret, `dlv_${i}`, t, Buffer.from(b, "utf8"))).toEqual(headers)
        expect(verify(headers["service-signature"]!, b, secret, 300, t)).toEqual({ ok: true, timestamp: t })
      }
    }
    expect(signedHeaders(secrets[0]!, "a", 1, body)["service-signature"]).not.toBe(
      signedHeaders(secrets[1]!, "a", 1, body)["service-signature"]
    )
    expect(() => signedHeaders(secrets[0]!, "dlv_1", -1, body)).toThrow(RangeError)
  })
})
