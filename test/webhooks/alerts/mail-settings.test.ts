// SMTP_URL and ALERT_FROM (docs/configuration.md): unset, no mail; set, checked, a bad value
// refusing the start with a message naming the setting.
import { ConfigProvider, Effect, Exit } from "effect"
import { describe, expect, it } from "vitest"
import { loadMailSettings } from "../../../src/webhooks/alerts/mail.ts"

const load = (env: Record<string, string>) =>
  Effect.runSyncExit(loadMailSettings.pipe(Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnvRecord(env)))))

const refusal = (env: Record<string, string>) => {
  const exit = load(env)
  if (Exit.isSuccess(exit)) throw new Error("expected a refusal")
  return String(exit.cause)
}

describe("alert mail settings", () => {
  it("unset SMTP_URL: no mail", () => {
    expect(load({})).toEqual(Exit.succeed(null))
    expect(load({ ALERT_FROM: "alerts@example.com" })).toEqual(Exit.succeed(null))
  })

  it("smtp:// and smtps:// with user and password, and the sender", () => {
    expect(load({ SMTP_URL: "smtps://u:p@mail.example.com:465", ALERT_FROM: "Safety <alerts@example.com>" })).toEqual(
      Exit.succeed({
        url: "smtps://u:p@mail.example.com:465",
        from: "Safety <alerts@example.com>",
        host: "mail.example.com"
      })
    )
    expect(Exit.isSuccess(load({ SMTP_URL: "smtp://u:p@127.0.0.1:2525", ALERT_FROM: "alerts@example.com" }))).toBe(true)
  })

  it("refuses another scheme, no URL, or no ALERT_FROM", () => {
    expect(refusal({ SMTP_URL: "http://mail.example.com", ALERT_FROM: "a@b.c" })).toContain(
      "SMTP_URL must start with smtp:// or smtps://, not http://"
    )
    expect(refusal({ SMTP_URL: "mail.example.com", ALERT_FROM: "a@b.c" })).toContain("SMTP_URL is not a URL")
    expect(refusal({ SMTP_URL: "smtp://u:p@mail.example.com" })).toContain(
      "ALERT_FROM must be the sender's address (alerts@example.com) when SMTP_URL is set"
    )
  })
})
