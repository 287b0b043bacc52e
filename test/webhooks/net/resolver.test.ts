// Name lookups with a deadline, off libuv's thread pool, /etc/hosts first: against a real DNS
// server on loopback (UDP) that answers, says a name does not exist, or never answers.
import { execFileSync } from "node:child_process"
import { createSocket } from "node:dgram"
import { lookup as dnsLookup } from "node:dns/promises"
import { closeSync, constants, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from "node:fs"
import { readFile } from "node:fs/promises"
import { setTimeout as sleep } from "node:timers/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { resolveAndCheck } from "../../../src/webhooks/net/address-guard.ts"
import { makeLookup, parseHosts } from "../../../src/webhooks/net/resolver.ts"

type Behaviour = {
  readonly ttl?: number
  readonly delayMs?: number
  readonly silent?: boolean
  readonly absent?: boolean
}

/**
 * A DNS server on loopback. Per name: A 127.0.0.1 with `ttl`, after `delayMs`; `absent`:
 * NXDOMAIN; `silent`: never answers. No AAAA records (an empty answer).
 */
const dnsServer = async (names: Record<string, Behaviour>) => {
  const socket = createSocket("udp4")
  const questions: Array<{ name: string; type: number }> = []
  let closed = false
  socket.on("message", (query, from) => {
    let at = 12
    const labels: Array<string> = []
    while (query[at]! !== 0) {
      labels.push(query.subarray(at + 1, at + 1 + query[at]!).toString("latin1"))
      at += query[at]! + 1
    }
    const name = labels.join(".").toLowerCase()
    const type = query.readUInt16BE(at + 1)
    questions.push({ name, type })
    const b = names[name] ?? { absent: true }
    if (b.silent) return
    const question = query.subarray(12, at + 5)
    const header = Buffer.alloc(12)
    query.copy(header, 0, 0, 2)
    header.writeUInt16BE(b.absent ? 0x8183 : 0x8180, 2) // a response; rcode 3 (NXDOMAIN) when absent
    header.writeUInt16BE(1, 4)
    const answers = !b.absent && type === 1 ? 1 : 0
    header.writeUInt16BE(answers, 6)
    const answer = Buffer.alloc(16)
    answer.writeUInt16BE(0xc00c, 0) // the name in the question
    answer.writeUInt16BE(1, 2)
    answer.writeUInt16BE(1, 4)
    answer.writeUInt32BE(b.ttl ?? 60, 6)
    answer.writeUInt16BE(4, 10)
    answer.set([127, 0, 0, 1], 12)
    const reply = Buffer.concat([header, question, ...(answers ? [answer] : [])])
    setTimeout(() => closed || socket.send(reply, from.port, from.address), b.delayMs ?? 0)
  })
  await new Promise<void>((res) => socket.bind(0, "127.0.0.1", () => res()))
  return {
    server: `127.0.0.1:${socket.address().port}`,
    questions,
    close: () => {
      closed = true
      return new Promise<void>((res) => socket.close(() => res()))
    }
  }
}

let dir: string
let hostsPath: string
let dns: Awaited<ReturnType<typeof dnsServer>>
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "srs-resolver-"))
  hostsPath = join(dir, "hosts")
  writeFileSync(
    hostsPath,
    "# a hosts file\n203.0.113.9   listed.test Listed-Alias.test  # trailing comment\n2001:db8::9 listed.test\n"
  )
  dns = await dnsServer({
    "ttl.test": { ttl: 7 },
    "slow.test": { ttl: 9, delayMs: 300 },
    "silent.test": { silent: true },
    "listed.test": { ttl: 1 }
  })
})
afterAll(async () => {
  await dns?.close()
  rmSync(dir, { recursive: true, force: true })
})

/** Writes to a FIFO once its reader is there (a writer that opened first would block for good). */
const release = async (fifo: string) => {
  for (let tries = 0; ; tries++) {
    try {
      const fd = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK)
      writeSync(fd, "go")
      closeSync(fd)
      return
    } catch (e) {
      if ((e as { code?: string }).code !== "ENXIO" || tries > 500) throw e
      await sleep(10)
    }
  }
}

const lookup = (deadlineMs = 2_000) =>
  makeLookup({ servers: [dns.server], hostsPath, timeoutMs: 200, tries: 1, deadlineMs })

describe("the hosts file", () => {
  it.each([
    ["one name", "10.0.0.1 a.test", { "a.test": ["10.0.0.1"] }],
    [
      "aliases, comments, case",
      "# x\n10.0.0.1  A.test b.test # c.test\n",
      { "a.test": ["10.0.0.1"], "b.test": ["10.0.0.1"] }
    ],
    ["both families", "10.0.0.1 a.test\n::1 a.test\n", { "a.test": ["10.0.0.1", "::1"] }],
    ["not an address", "banana a.test\n10.0.0.300 b.test\n", {}],
    ["an address with no name", "10.0.0.1\n", {}],
    ["a trailing dot", "10.0.0.1 a.test.\n", { "a.test": ["10.0.0.1"] }]
  ])("parses %s", (_, text, expected) => {
    const table = parseHosts(text)
    expect(Object.fromEntries([...table].map(([k, v]) => [k, v.map((a) => a.address)]))).toEqual(expected)
  })

  it("answers a name it lists without asking DNS, in any case", async () => {
    const before = dns.questions.length
    const answers = await lookup()("Listed.TEST")
    expect(answers.map((a) => [a.address, a.family])).toEqual([
      ["203.0.113.9", 4],
      ["2001:db8::9", 6]
    ])
    expect((await lookup()("listed-alias.test")).map((a) => a.address)).toEqual(["203.0.113.9"])
    expect(dns.questions.length).toBe(before)
  })

  it("answers localhost as loopback without DNS", async () => {
    const before = dns.questions.length
    const answers = await lookup()("api.localhost")
    expect(answers.map((a) => a.address).sort()).toEqual(["127.0.0.1", "::1"])
    expect(dns.questions.length).toBe(before)
  })
})

describe("DNS", () => {
  it("gives the addresses with their TTL, asking for both families", async () => {
    const answers = await lookup()("ttl.test")
    expect(answers).toEqual([{ address: "127.0.0.1", family: 4, ttl: 7 }])
    expect(
      dns.questions
        .filter((q) => q.name === "ttl.test")
        .map((q) => q.type)
        .sort()
    ).toEqual([1, 28])
  })

  it("says a name that does not exist does not", async () => {
    await expect(lookup()("nowhere.test")).rejects.toMatchObject({ code: "ENOTFOUND" })
  })

  it("gives up on a name DNS never answers at the deadline, as a timeout", async () => {
    const started = performance.now()
    await expect(lookup(400)("silent.test")).rejects.toMatchObject({ code: "ETIMEOUT" })
    const took = performance.now() - started
    expect(took).toBeGreaterThanOrEqual(150)
    const r = await resolveAndCheck("https://silent.test/hook", { lookup: lookup(400) })
    expect(r).toMatchObject({ ok: false, kind: "timeout" })
    if (!r.ok) expect(r.error).toMatch(/^timeout: no answer from DNS for silent\.test/)
  })

  it("answers while every thread of libuv's pool is blocked, where getaddrinfo waits for one", async () => {
    // Each read of a FIFO with no writer blocks a pool thread in open() until one comes.
    const pool = Number(process.env.UV_THREADPOOL_SIZE ?? 4)
    const fifos = Array.from({ length: pool }, (_, i) => join(dir, `fifo-${i}`))
    for (const f of fifos) execFileSync("mkfifo", [f])
    const blocked = fifos.map((f) => readFile(f, "utf8"))
    let system: "pending" | "settled" = "pending"
    const viaPool = dnsLookup("localhost").finally(() => {
      system = "settled"
    })
    try {
      await sleep(50) // the reads have taken every thread
      const answers = await lookup()("slow.test") // 300 ms on DNS
      expect(answers.map((a) => a.address)).toEqual(["127.0.0.1"])
      // getaddrinfo is still queued behind the blocked reads.
      expect(system).toBe("pending")
    } finally {
      for (const f of fifos) await release(f)
      await Promise.all(blocked)
      await viaPool.catch(() => undefined)
    }
    expect(system).toBe("settled")
  })
})
