// Which client a request came from: TRUST_PROXY's values (a bad one refused at start, naming
// the entry), X-Forwarded-For read from the right and only from trusted proxies, and the
// bucket an address counts in (an IPv6 client by its /64).
import { Cause, ConfigProvider, Effect, Exit } from "effect"
import { describe, expect, it } from "vitest"
import { loadTrustProxy } from "../../../src/platform/config.ts"
import { StartRefused } from "../../../src/platform/db/refusal.ts"
import {
  clientAddress,
  clientKey,
  forwardedAddress,
  parseTrustProxy,
  TRUST_PROXY_USAGE,
  type TrustProxy
} from "../../../src/platform/http/client-address.ts"

const trust = (text: string): TrustProxy => {
  const t = parseTrustProxy(text)
  if ("error" in t) throw new Error(t.error)
  return t
}

describe("TRUST_PROXY", () => {
  it.each([
    ["", "None"],
    ["false", "None"],
    ["FALSE", "None"],
    ["true", "Peer"],
    [" True ", "Peer"],
    ["10.0.0.0/8", "Networks"],
    ["10.0.0.0/8, 172.16.0.0/12,fd00::/8", "Networks"],
    ["192.0.2.1", "Networks"],
    ["::1", "Networks"]
  ])("%j is %s", (text, tag) => expect((parseTrustProxy(text) as TrustProxy)._tag).toBe(tag))

  it.each([
    ["yes", "yes"],
    ["1", "1"],
    ["10.0.0.0/33", "10.0.0.0/33"],
    ["10.0.0.0/8,proxy.internal", "proxy.internal"],
    ["fd00::/129", "fd00::/129"],
    ["10.0.0.0/", "10.0.0.0/"],
    ["10.0.0.0/x", "10.0.0.0/x"]
  ])("%j is refused, naming %j", (text, entry) =>
    expect(parseTrustProxy(text)).toEqual({ error: `${TRUST_PROXY_USAGE}; "${entry}" is not an IP address or network` })
  )

  const load = (env: Record<string, string>) =>
    Effect.runSyncExit(loadTrustProxy.pipe(Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnvRecord(env)))))

  it("from the environment: unset is none; a bad value refuses the start with the usage", () => {
    const unset = load({})
    expect(Exit.isSuccess(unset) && unset.value).toEqual({ _tag: "None" })
    const on = load({ TRUST_PROXY: "true" })
    expect(Exit.isSuccess(on) && on.value).toEqual({ _tag: "Peer" })
    const bad = load({ TRUST_PROXY: "on" })
    expect(Exit.isFailure(bad)).toBe(true)
    if (Exit.isFailure(bad)) {
      const error = Cause.squash(bad.cause)
      expect(error).toBeInstanceOf(StartRefused)
      expect((error as StartRefused).message).toBe(`${TRUST_PROXY_USAGE}; "on" is not an IP address or network`)
    }
  })
})

describe("X-Forwarded-For", () => {
  it.each([
    ["198.51.100.1", "198.51.100.1"],
    [" 198.51.100.1 ", "198.51.100.1"],
    ["198.51.100.1:4711", "198.51.100.1"],
    ["2001:db8::1", "2001:db8::1"],
    ["[2001:db8::1]:443", "2001:db8::1"],
    ["::ffff:198.51.100.1", "198.51.100.1"],
    ["unknown", undefined],
    ["", undefined],
    ["198.51.100.300", undefined],
    ["proxy.example", undefined]
  ])("entry %j is %j", (entry, address) => expect(forwardedAddress(entry)).toBe(address))

  const none = trust("false")
  const peer = trust("true")
  const nets = trust("10.0.0.0/8,fd00::/8")
  it.each<[string, string | undefined, string | undefined, TrustProxy, string | undefined]>([
    ["off: the socket, whatever the header", "10.0.0.1", "198.51.100.1", none, "10.0.0.1"],
    ["off: a dual-stack socket's mapped address", "::ffff:10.0.0.1", undefined, none, "10.0.0.1"],
    ["true: the last entry", "10.0.0.1", "203.0.113.5, 198.51.100.1", peer, "198.51.100.1"],
    ["true: no header, the socket", "10.0.0.1", undefined, peer, "10.0.0.1"],
    ["true: a last entry that is no address, the socket", "10.0.0.1", "198.51.100.1, garbage", peer, "10.0.0.1"],
    ["no socket address", undefined, undefined, none, undefined]
  ])("%s", (_name, socket, header, t, client) => expect(clientAddress(socket, header, t)).toBe(client))
  it.each<[string, string | undefined, string | undefined, string | undefined]>([
    ["networks: an untrusted socket's header is ignored", "198.51.100.9", "203.0.113.5", "198.51.100.9"],
    ["networks: the right-most untrusted entry", "10.0.0.1", "203.0.113.5, 198.51.100.1, 10.2.2.2", "198.51.100.1"],
    ["networks: IPv6 proxies", "fd00::1", "2001:db8::7", "2001:db8::7"],
    ["networks: every hop trusted, the left-most", "10.0.0.1", "10.9.9.9, 10.2.2.2", "10.9.9.9"],
    ["networks: garbage stops at the last known address", "10.0.0.1", "203.0.113.5, nonsense, 10.2.2.2", "10.2.2.2"],
    ["networks: no header, the socket", "10.0.0.1", undefined, "10.0.0.1"]
  ])("%s", (_name, socket, header, client) => expect(clientAddress(socket, header, nets)).toBe(client))
})

describe("clientKey", () => {
  it.each([
    ["198.51.100.1", "198.51.100.1"],
    ["::ffff:198.51.100.1", "198.51.100.1"],
    ["2001:db8:1:2::1", "2001:db8:1:2::/64"],
    ["2001:DB8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"],
    ["2001:0db8:0001:0002:0:0:0:9", "2001:db8:1:2::/64"],
    ["::1", "0:0:0:0::/64"],
    [undefined, "-"]
  ])("%j counts as %j", (address, key) => expect(clientKey(address)).toBe(key))
})
