// A webhook receiver for the Safety Records Service, in plain Node (18+), no dependencies.
//
//   WEBHOOK_SECRET=whsec_... PORT=4000 node server.mjs
//   (TLS_CERT=cert.pem TLS_KEY=key.pem to serve HTTPS, as real deliveries need)
//
// What every receiver must do (README "Verifying a webhook"):
// 1. Read the RAW body bytes: re-serialised JSON can differ and breaks the signature.
// 2. Verify: Standard Webhooks headers (webhook-id, webhook-timestamp, webhook-signature) or
//    the Service-Signature header; timestamps older or newer than 5 minutes are refused.
//    During a secret rotation a delivery carries two signatures; either may match.
// 3. Answer 2xx at once (within 10 s); do slow work afterwards.
// 4. Deliveries can repeat: skip an id already handled.
import { createHmac, timingSafeEqual } from "node:crypto"
import { readFileSync } from "node:fs"
import { createServer as createHttp } from "node:http"
import { createServer as createHttps } from "node:https"

const SECRET = process.env.WEBHOOK_SECRET ?? ""
const TOLERANCE_SECONDS = 300
if (!SECRET.startsWith("whsec_")) {
  console.error("Set WEBHOOK_SECRET to the endpoint's whsec_... secret")
  process.exit(1)
}

const equal = (a, b) => {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}
const fresh = (seconds) => Number.isSafeInteger(seconds) && Math.abs(Date.now() / 1000 - seconds) <= TOLERANCE_SECONDS

/** Standard Webhooks: HMAC-SHA256 of "id.timestamp.body", keyed with the base64 after whsec_. */
const standardOk = (headers, body) => {
  const id = headers["webhook-id"]
  const timestamp = Number(headers["webhook-timestamp"])
  const signatures = String(headers["webhook-signature"] ?? "").split(" ")
  if (!id || !fresh(timestamp)) return false
  const key = Buffer.from(SECRET.slice("whsec_".length), "base64")
  const expected = createHmac("sha256", key).update(`${id}.${timestamp}.`).update(body).digest("base64")
  return signatures.some((s) => s.startsWith("v1,") && equal(s.slice(3), expected))
}

/** Service-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "t." + body>, keyed with the whole secret. */
const serviceOk = (header, body) => {
  const parts = String(header ?? "")
    .split(",")
    .map((p) => p.split("="))
  const t = Number(parts.find(([k]) => k === "t")?.[1])
  if (!fresh(t)) return false
  const expected = createHmac("sha256", SECRET).update(`${t}.`).update(body).digest("hex")
  return parts.some(([k, v]) => k === "v1" && v !== undefined && equal(v, expected))
}

const seen = new Set() // a real receiver keeps this in its database

const handler = (req, res) => {
  if (req.method !== "POST") return res.writeHead(405).end()
  const chunks = []
  req.on("data", (c) => chunks.push(c))
  req.on("end", () => {
    const body = Buffer.concat(chunks)
    const ok = req.headers["webhook-signature"]
      ? standardOk(req.headers, body)
      : serviceOk(req.headers["service-signature"], body)
    if (!ok) {
      console.log("refused: bad signature")
      return res.writeHead(400, { "content-type": "application/json" }).end('{"error":"bad signature"}')
    }
    const delivery = JSON.parse(body.toString("utf8"))
    res.writeHead(204).end() // answer first, work after
    if (seen.has(delivery.id)) return console.log(`repeat ${delivery.id} skipped`)
    seen.add(delivery.id)
    console.log(`verified ${delivery.event} ${delivery.id} record ${delivery.data?.id}`)
  })
}

const port = Number(process.env.PORT ?? 4000)
const server = process.env.TLS_CERT
  ? createHttps({ cert: readFileSync(process.env.TLS_CERT), key: readFileSync(process.env.TLS_KEY) }, handler)
  : createHttp(handler)
server.listen(port, process.env.HOST ?? "127.0.0.1", () =>
  console.log(
    `listening on ${process.env.TLS_CERT ? "https" : "http"}://${process.env.HOST ?? "127.0.0.1"}:${server.address().port}`
  )
)
