// A real HTTPS webhook receiver on loopback, with a CA made for this test run by the openssl
// CLI. It records every request byte for byte and answers as each test scripts it.
//
// The sender only trusts this CA when given it (SendOptions.ca); NODE_EXTRA_CA_CERTS is read
// at process start, which is too early for a CA made during the run.
import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http"
import { createServer, type Server } from "node:https"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { TLSSocket } from "node:tls"

/**
 * Names the receiver's certificate is valid for (lookups in tests point them at 127.0.0.1);
 * `*.hung.test` names receivers of one process on several loopback addresses (bench:webhooks).
 */
export const CERT_DNS_NAMES = [
  "localhost",
  "receiver.test",
  "hooks.receiver.test",
  "webhook-test.local",
  "rebind.test",
  "*.hung.test"
]
export const CERT_IPS = ["127.0.0.1", "::1"]

export type Certs = { readonly caCert: string; readonly cert: string; readonly key: string }

const openssl = (dir: string, args: ReadonlyArray<string>) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" })

/** `openssl req` arguments for a new P-256 key (unencrypted) and what it writes with it. */
const newEcKey = (name: string, out: string) => [
  ...["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"],
  ...["-keyout", `${name}.key`, "-out", out]
]

const makeCa = (dir: string, name: string) => {
  openssl(dir, [
    ...newEcKey(name, `${name}.crt`),
    ...["-x509", "-days", "2", "-subj", `/CN=${name}`],
    ...["-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"]
  ])
}

const makeLeaf = (dir: string, ca: string, name: string): Certs => {
  const san = [...CERT_DNS_NAMES.map((n) => `DNS:${n}`), ...CERT_IPS.map((ip) => `IP:${ip}`)].join(",")
  writeFileSync(
    join(dir, `${name}.ext`),
    `subjectAltName=${san}\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n`
  )
  openssl(dir, [...newEcKey(name, `${name}.csr`), "-subj", "/CN=localhost"])
  openssl(dir, [
    ...["x509", "-req", "-in", `${name}.csr`, "-CA", `${ca}.crt`, "-CAkey", `${ca}.key`, "-CAcreateserial"],
    ...["-out", `${name}.crt`, "-days", "2", "-extfile", `${name}.ext`]
  ])
  return {
    caCert: readFileSync(join(dir, `${ca}.crt`), "utf8"),
    cert: readFileSync(join(dir, `${name}.crt`), "utf8"),
    key: readFileSync(join(dir, `${name}.key`), "utf8")
  }
}

let certs: { trusted: Certs; untrusted: Certs } | undefined

/** Two independent CAs with one leaf each: the tests trust the first only. Made once per process. */
export const testCerts = (): { trusted: Certs; untrusted: Certs } => {
  if (certs) return certs
  const dir = mkdtempSync(join(tmpdir(), "srs-certs-"))
  try {
    makeCa(dir, "test-ca")
    makeCa(dir, "rogue-ca")
    certs = { trusted: makeLeaf(dir, "test-ca", "receiver"), untrusted: makeLeaf(dir, "rogue-ca", "rogue") }
    return certs
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

export type Reply = {
  readonly status?: number
  readonly body?: string | Uint8Array
  readonly headers?: Readonly<Record<string, string>>
  /** Wait this long before answering. */
  readonly delayMs?: number
  /** Never answer (the socket stays open until the sender gives up or the receiver closes). */
  readonly hang?: boolean
  /** Send the status and headers, then never finish the body. */
  readonly hangBody?: boolean
  /** Answer 302 (or `status`) with this Location. */
  readonly redirect?: string
  /** Close the socket without any answer. */
  readonly destroy?: boolean
  /** Stream a body of this many bytes (of `fill`, default "x"). */
  readonly bodyBytes?: number
  readonly fill?: string
}

export type RecordedRequest = {
  readonly method: string
  readonly path: string
  readonly headers: IncomingHttpHeaders
  readonly rawHeaders: ReadonlyArray<string>
  readonly body: Buffer
  readonly arrivedAt: number
  /** The TLS SNI name the client sent (null when it sent none, e.g. for an IP literal). */
  readonly servername: string | null
  readonly localAddress: string | undefined
}

export type Receiver = {
  readonly host: string
  readonly port: number
  readonly ca: string
  readonly requests: ReadonlyArray<RecordedRequest>
  /** TCP connections accepted, whether or not a request followed. */
  readonly connections: number
  /** Bytes of streamed bodies actually written (for bounded-read checks). */
  readonly bodyBytesWritten: number
  url(path?: string, host?: string): string
  /** How to answer requests at a path: always the same, or as a function of the request. */
  reply(path: string, reply: Reply | ((request: RecordedRequest) => Reply)): void
  close(): Promise<void>
}

export const startHttpsReceiver = async (
  options: { host?: string; port?: number; certs?: "trusted" | "untrusted" } = {}
): Promise<Receiver> => {
  const host = options.host ?? "127.0.0.1"
  const pair = testCerts()[options.certs ?? "trusted"]
  const requests: Array<RecordedRequest> = []
  const replies = new Map<string, Reply | ((request: RecordedRequest) => Reply)>()
  const timers = new Set<NodeJS.Timeout>()
  let connections = 0
  let bodyBytesWritten = 0

  const answer = (reply: Reply, res: ServerResponse) => {
    if (reply.destroy) return res.socket?.destroy()
    if (reply.hang) return
    if (reply.redirect !== undefined) {
      res.writeHead(reply.status ?? 302, { location: reply.redirect, ...reply.headers })
      return res.end(reply.body ?? "")
    }
    res.writeHead(reply.status ?? 200, { "content-type": "text/plain; charset=utf-8", ...reply.headers })
    if (reply.hangBody) return res.write("partial")
    if (reply.bodyBytes !== undefined) return streamBody(res, reply.bodyBytes, reply.fill ?? "x")
    res.end(reply.body ?? "")
  }

  const streamBody = (res: ServerResponse, total: number, fill: string) => {
    const chunk = Buffer.from(fill.repeat(Math.ceil(65536 / Buffer.byteLength(fill)))).subarray(0, 65536)
    let left = total
    const pump = () => {
      while (left > 0 && !res.destroyed) {
        const piece = chunk.subarray(0, Math.min(left, chunk.length))
        left -= piece.length
        bodyBytesWritten += piece.length
        if (!res.write(piece)) return void res.once("drain", pump)
      }
      if (!res.destroyed) res.end()
    }
    pump()
  }

  const handler = (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const path = req.url ?? "/"
      const socket = req.socket as TLSSocket
      const sni = (socket as TLSSocket & { servername?: string | false }).servername
      const recorded: RecordedRequest = {
        method: req.method ?? "",
        path,
        headers: req.headers,
        rawHeaders: req.rawHeaders,
        body: Buffer.concat(chunks),
        arrivedAt: Date.now(),
        servername: typeof sni === "string" && sni !== "" ? sni : null,
        localAddress: socket.localAddress
      }
      requests.push(recorded)
      const scripted = replies.get(path.split("?")[0]!) ?? {}
      const reply = typeof scripted === "function" ? scripted(recorded) : scripted
      if (reply.delayMs) {
        const t = setTimeout(() => {
          timers.delete(t)
          answer(reply, res)
        }, reply.delayMs)
        timers.add(t)
      } else answer(reply, res)
    })
  }

  const server: Server = createServer({ cert: pair.cert, key: pair.key, ca: pair.caCert }, handler)
  server.on("connection", () => connections++)
  // Handshake failures (the sender rejecting our certificate) are expected in some tests.
  server.on("tlsClientError", () => undefined)
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(options.port ?? 0, host, () => resolve())
  })
  const port = (server.address() as { port: number }).port

  return {
    host,
    port,
    ca: testCerts().trusted.caCert,
    get requests() {
      return requests
    },
    get connections() {
      return connections
    },
    get bodyBytesWritten() {
      return bodyBytesWritten
    },
    url: (path = "/hook", name?: string) => {
      const h = name ?? (host.includes(":") ? `[${host}]` : host)
      return `https://${h}:${port}${path}`
    },
    reply: (path, reply) => void replies.set(path, reply),
    close: () =>
      new Promise<void>((resolve) => {
        for (const t of timers) clearTimeout(t)
        server.close(() => resolve())
        server.closeAllConnections()
      })
  }
}
