import { createHash, randomBytes } from "node:crypto"
import { chmodSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { useTempDirs } from "../../support/fixtures.ts"
import {
  decryptSecret,
  encryptSecret,
  keyFingerprint,
  loadSecretsKey
} from "../../../src/platform/secrets/secrets-key.ts"

const tempDir = useTempDirs("srs-secrets-")

describe("encryptSecret / decryptSecret", () => {
  const key = randomBytes(32)
  const secret = "whsec_0123456789abcdefghijklmnopqrstuvwxyzABCDE="

  it("round-trips, with a fresh IV each time", () => {
    const a = encryptSecret(key, secret)
    const b = encryptSecret(key, secret)
    expect(decryptSecret(key, a)).toBe(secret)
    expect(a.equals(b)).toBe(false)
    expect(a[0]).toBe(1) // version byte
    expect(a.length).toBe(1 + 12 + 16 + Buffer.byteLength(secret))
    expect(a.includes(Buffer.from(secret))).toBe(false)
  })

  it("detects tampering anywhere in the blob", () => {
    const blob = encryptSecret(key, secret)
    for (const at of [1, 5, 13, 20, 29, blob.length - 1]) {
      const bad = Buffer.from(blob)
      bad[at] = bad[at]! ^ 0x01
      expect(() => decryptSecret(key, bad)).toThrow("does not decrypt")
    }
    expect(() => decryptSecret(key, blob.subarray(0, blob.length - 1))).toThrow("does not decrypt")
    expect(() => decryptSecret(key, blob.subarray(0, 10))).toThrow("too short")
    const v2 = Buffer.from(blob)
    v2[0] = 2
    expect(() => decryptSecret(key, v2)).toThrow("unknown format version 2")
  })

  it("refuses a wrong key, a wrong-sized key and a different context", () => {
    const blob = encryptSecret(key, secret, "endpoint:1")
    expect(() => decryptSecret(randomBytes(32), blob, "endpoint:1")).toThrow("wrong SECRETS_KEY")
    expect(() => decryptSecret(key, blob, "endpoint:2")).toThrow("does not decrypt")
    expect(() => decryptSecret(key, blob)).toThrow("does not decrypt")
    expect(decryptSecret(key, blob, "endpoint:1")).toBe(secret)
    expect(() => encryptSecret(randomBytes(16), secret)).toThrow("32 bytes")
  })
})

describe("keyFingerprint", () => {
  // Expected values from openssl, not from node: printf '%s' "safety-records-service secrets
  // key fingerprint v1" | openssl dgst -sha256 -mac HMAC -macopt hexkey:<key>
  const cases: ReadonlyArray<readonly [string, string]> = [
    ["00".repeat(32), "42ebfe5f8e97d470c3f9784a2c5052d7f30a03162515be948573b3ae6c8f2c82"],
    [
      Buffer.from(Array.from({ length: 32 }, (_, i) => i)).toString("hex"),
      "636529d38faae5c605aa339d328bdc159f614fcbb1c1bde8a78a9081d3b9b7fb"
    ],
    ["ff".repeat(32), "86daf6d23250b8fa0779d63d6d46ce3d0de74c93eface3555d9e24c7c5befbeb"]
  ]
  it.each(cases)("is HMAC-SHA256 of the fixed label under key %s", (keyHex, fingerprint) => {
    expect(keyFingerprint(Buffer.from(keyHex, "hex"))).toBe(fingerprint)
  })

  it("is stable for one key, differs between keys, and is neither the key nor a plain hash of it", () => {
    const key = randomBytes(32)
    const fp = keyFingerprint(key)
    expect(fp).toMatch(/^[0-9a-f]{64}$/)
    expect(keyFingerprint(Buffer.from(key))).toBe(fp)
    expect(keyFingerprint(randomBytes(32))).not.toBe(fp)
    expect(fp).not.toContain(key.toString("hex"))
    expect(fp).not.toBe(createHash("sha256").update(key).digest("hex"))
    expect(() => keyFingerprint(randomBytes(16))).toThrow("32 bytes")
  })
})

describe("loadSecretsKey", () => {
  it("uses SECRETS_KEY when configured (standard or URL-safe base64)", () => {
    const raw = randomBytes(32)
    const dataDir = tempDir()
    expect(loadSecretsKey({ configured: raw.toString("base64"), dataDir })).toEqual({
      key: raw,
      source: "SECRETS_KEY",
      path: null
    })
    expect(loadSecretsKey({ configured: raw.toString("base64url"), dataDir }).key.equals(raw)).toBe(true)
    expect(() => statSync(join(dataDir, "secrets.key"))).toThrow() // no file made
  })

  it("explains a malformed SECRETS_KEY without echoing it", () => {
    const dataDir = tempDir()
    expect(() => loadSecretsKey({ configured: randomBytes(16).toString("base64"), dataDir })).toThrow(
      "SECRETS_KEY must be base64 of 32 bytes, got 16 bytes"
    )
    expect(() => loadSecretsKey({ configured: "not base64!!", dataDir })).toThrow(
      /^SECRETS_KEY is not base64; make one with: openssl rand -base64 32$/
    )
  })

  it("creates <dataDir>/secrets.key with mode 0600 and reads it back", () => {
    const dataDir = join(tempDir(), "nested")
    const first = loadSecretsKey({ dataDir })
    expect(first.source).toBe("created")
    expect(first.path).toBe(join(dataDir, "secrets.key"))
    expect(first.key).toHaveLength(32)
    expect(statSync(first.path!).mode & 0o777).toBe(0o600)
    expect(Buffer.from(readFileSync(first.path!, "utf8").trim(), "base64").equals(first.key)).toBe(true)
    const again = loadSecretsKey({ dataDir, configured: "" })
    expect(again).toEqual({ key: first.key, source: "file", path: first.path })
  })

  it("refuses a key file others can read, and a malformed one", () => {
    const dataDir = tempDir()
    const path = join(dataDir, "secrets.key")
    writeFileSync(path, randomBytes(32).toString("base64"), { mode: 0o644 })
    chmodSync(path, 0o644)
    expect(() => loadSecretsKey({ dataDir })).toThrow(`mode 644); run: chmod 600 ${path}`)
    writeFileSync(path, "short")
    chmodSync(path, 0o600)
    expect(() => loadSecretsKey({ dataDir })).toThrow(`${path} must be base64 of 32 bytes`)
  })
})
