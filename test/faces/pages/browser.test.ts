// The admin pages end to end in headless Chromium (playwright-core, Debian's chromium) against
// the real service process (src/main.ts: capture, delivery, the HTTP server) on a test
// database, with a real HTTPS receiver on loopback: sign in with a token from the CLI, make a
// key and use it, revoke it; add an endpoint, send a test event, see a real delivery and
// Send Again; turn a switched-off endpoint on; the API's subscriptions; the activity log; and
// hostile pages on other loopback origins whose forms are refused. Screenshots of each page
// go to test-output/admin/.
import { randomBytes } from "node:crypto"
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createServer, type Server } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { chromium, type Browser, type BrowserContext, type Locator, type Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { waitFor as poll } from "../../support/wait.ts"
import { request } from "../../support/http.ts"
import { insertIncident, makeCompany } from "../../support/app.ts"
import { freshDatabase, type TestDatabase } from "../../support/db.ts"
import { startHttpsReceiver, type Receiver } from "../../support/https-receiver.ts"
import { freePort } from "../../support/net.ts"
import { runCli } from "../../support/cli.ts"
import { expectAccessible, startService, type ServiceProcess } from "../../support/pages.ts"

// CHROMIUM_PATH when set (and only it), else Debian's chromium.
const CHROMIUM = (
  process.env.CHROMIUM_PATH ? [process.env.CHROMIUM_PATH] : ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
).find((p) => existsSync(p))
const SHOTS = fileURLToPath(new URL("../../../test-output/admin/", import.meta.url))

if (CHROMIUM === undefined) {
  console.warn(
    "test/faces/pages/browser.test.ts: SKIPPED: no Chromium found (set CHROMIUM_PATH, or `apt-get install chromium`); the admin pages' browser tests did not run. CI installs it (.ci/run)."
  )
}

// The pages are polled less often than the database: each check drives the browser.
const waitFor = <A>(check: () => A | Promise<A>, what: string, ms = 30_000) => poll(check, what, ms, 100)

/** The trimmed text of the one element a locator finds (it waits for it). */
const text = async (l: Locator): Promise<string> => ((await l.textContent({ timeout: 5_000 })) ?? "").trim()

/** Retries an assertion for a while (for what a page's script does after an event). */
const eventually = async (check: () => Promise<void>, ms = 5_000): Promise<void> => {
  const deadline = Date.now() + ms
  for (;;) {
    try {
      return await check()
    } catch (e) {
      if (Date.now() > deadline) throw e
      await new Promise((r) => setTimeout(r, 100))
    }
  }
}

/** A page on another origin whose form posts itself to `action` as soon as it loads. */
const hostileServer = async (host: string, action: () => string, fields: () => Record<string, string>) => {
  const port = await freePort()
  const server: Server = createServer((req, res) => {
    if (req.url === "/favicon.ico") return void res.writeHead(404).end()
    const inputs = Object.entries(fields())
      .map(([k, v]) => `<input type="hidden" name="${k}" value="${v}">`)
      .join("")
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" })
    res.end(`<!doctype html><html><body><h1>Win a prize!</h1>
<form id="f" method="post" action="${action()}">${inputs}<button>Claim</button></form>
<script>document.getElementById("f").submit()</script></body></html>`)
  })
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", () => resolve()))
  return { url: `http://${host}:${port}/`, close: () => new Promise<void>((resolve) => server.close(() => resolve())) }
}

describe.skipIf(CHROMIUM === undefined)("admin pages in a browser", () => {
  let db: TestDatabase
  let receiver: Receiver
  let service: ServiceProcess
  let browser: Browser
  let context: BrowserContext
  let page: Page
  let company: { id: string; host: string }
  let token: string
  let dir: string
  const adminEmail = "ada@web-test.example"
  const consoleErrors: Array<string> = []

  const shot = async (name: string, p: Page = page) => {
    await p.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true })
  }
  const go = async (path: string) => {
    const r = await page.goto(service.url + path)
    return r!
  }
  const submit = async (button: ReturnType<Page["getByRole"]>) => {
    const [response] = await Promise.all([page.waitForNavigation(), button.click()])
    return response!
  }

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true })
    dir = mkdtempSync(join(tmpdir(), "srs-web-"))
    db = await freshDatabase()
    company = await makeCompany(db.sql, { host: "acme.web.test" })
    await db.sql`update app.companies set name = 'Acme Construction' where id = ${company.id}`
    await db.sql`insert into app.users (company_id, name, email, role) values (${company.id}, 'Ada Admin', ${adminEmail}, 'admin')`
    receiver = await startHttpsReceiver()
    const caFile = join(dir, "ca.pem")
    writeFileSync(caFile, receiver.ca)
    service = await startService({
      DATABASE_URL: db.url,
      DATA_DIR: dir,
      REPLICATION_SLOT: `srs_web_${randomBytes(4).toString("hex")}`,
      WEBHOOK_ALLOWED_NETWORKS: "127.0.0.0/8",
      NODE_EXTRA_CA_CERTS: caFile,
      SECRETS_KEY: randomBytes(32).toString("base64"),
      WEBHOOK_RETRY_SCHEDULE: "2s,2s,2s,2s,2s",
      API_USAGE_FLUSH: "200 millis",
      CAPTURE_HEARTBEAT: "1 second"
    })
    const created = await runCli(["tokens", "create", "--as", adminEmail, "--name", "browser test", "--json"], {
      DATABASE_URL: db.url
    })
    expect(created.code, created.stderr).toBe(0)
    token = JSON.parse(created.stdout).token
    browser = await chromium.launch({ executablePath: CHROMIUM!, headless: true })
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
    await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: service.url })
    page = await context.newPage()
    // Answers with an error status (a refused sign-in is a 401 page) are logged too; not those.
    page.on("console", (m) => {
      if (m.type() === "error" && !m.text().startsWith("Failed to load resource")) consoleErrors.push(m.text())
    })
    page.on("pageerror", (e) => consoleErrors.push(e.message))
  }, 120_000)

  afterAll(async () => {
    await browser?.close()
    await service?.stop()
    await receiver?.close()
    await db?.drop()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  it("signs in with an admin token from the CLI; the session cookie is Secure, HttpOnly and SameSite=Strict", async () => {
    const first = await go("/admin")
    expect(page.url()).toBe(`${service.url}/admin/sign-in`)
    expect(first.status()).toBe(200)
    await page.getByLabel("Admin token").waitFor({ state: "visible", timeout: 5_000 })
    await shot("01-sign-in")
    await expectAccessible(page, "sign-in")

    await page.getByLabel("Admin token").fill("mat_wrong")
    const refused = await submit(page.getByRole("button", { name: "Sign in" }))
    expect(refused.status()).toBe(401)
    expect(await page.getByRole("alert").textContent()).toContain("unknown admin token")
    await shot("02-sign-in-refused")
    await expectAccessible(page, "sign-in refused")

    await page.getByLabel("Admin token").fill(token)
    await submit(page.getByRole("button", { name: "Sign in" }))
    expect(page.url()).toBe(`${service.url}/admin/keys`)
    expect(await text(page.getByRole("heading", { level: 1 }))).toBe("API keys")
    expect(await page.locator(".who").textContent()).toContain("Acme Construction")

    const cookies = await context.cookies(service.url)
    const session = cookies.find((c) => c.name === "__Host-srs_admin")
    expect(session, JSON.stringify(cookies)).toMatchObject({
      secure: true,
      httpOnly: true,
      sameSite: "Strict",
      path: "/",
      domain: "127.0.0.1"
    })
    expect(session!.value).not.toContain(token)
    expect(await page.evaluate<string>("document.cookie")).not.toContain("srs_admin")
    expect(await page.evaluate<boolean>("window.isSecureContext")).toBe(true)
  })

  let apiKey = ""
  const keyName = "Power BI export"

  it("creates a key, shows it once with a copy button, and the key reads the API", async () => {
    await go("/admin/keys")
    await page.getByLabel("Name", { exact: true }).fill(keyName)
    await page.getByRole("checkbox", { name: /Incidents, injuries/ }).check()
    await page.getByRole("checkbox", { name: /Corrective actions/ }).check()
    await page.getByRole("radio", { name: "After 90 days" }).check()
    await page.getByRole("checkbox", { name: /Webhooks permission/ }).check()
    await shot("03-keys-create-form")
    await expectAccessible(page, "keys: create form")
    await submit(page.getByRole("button", { name: "Create key" }))
    const once = page.locator("#new-key")
    apiKey = ((await once.textContent()) ?? "").trim()
    expect(apiKey).toMatch(/^mk_[A-Za-z0-9_-]{43}$/)
    expect(await page.locator(".once .warning").textContent()).toContain("only time the key is shown")
    await page.getByRole("button", { name: "Copy" }).click()
    await eventually(async () => expect(await text(page.locator(".copy-status"))).toBe("Copied."))
    expect(await page.evaluate<string>("navigator.clipboard.readText()")).toBe(apiKey)
    await shot("04-key-shown-once")
    await expectAccessible(page, "keys: key shown once")

    const me = await request(service.url, "/api/v1", { key: apiKey })
    expect(me.status).toBe(200)
    expect((await request(service.url, "/api/v1/incidents", { key: apiKey })).status).toBe(200)
    expect((await request(service.url, "/api/v1/workers", { key: apiKey })).status).toBe(403)

    // Shown once: the list never shows it again; it shows who made it, its last use and requests.
    await waitFor(
      async () => (await db.sql`select 1 from service.api_keys where request_count >= 3`).length > 0,
      "usage flush",
      15_000
    )
    await go("/admin/keys")
    expect(await page.content()).not.toContain(apiKey)
    const row = page.locator("tr", { hasText: keyName })
    expect(await text(row.locator('td[data-label="Made by"]'))).toContain(adminEmail)
    expect(await text(row.locator('td[data-label="Requests"]'))).toBe("3")
    expect(await row.locator('td[data-label="Last used"] time').count()).toBe(1)
    expect(await row.locator('td[data-label="Expires"] time').count()).toBe(1)
    await shot("05-keys-list")
    await expectAccessible(page, "keys: list")
  })

  it("revokes the key after a confirmation; the API then answers 401", async () => {
    await go("/admin/keys")
    const row = page.locator("tr", { hasText: keyName })
    // Dismissing the confirmation changes nothing.
    page.once("dialog", (d) => void d.dismiss())
    await row.getByRole("button", { name: `Revoke ${keyName}` }).click()
    await page.waitForTimeout(300)
    expect(page.url()).toBe(`${service.url}/admin/keys`)
    expect((await request(service.url, "/api/v1", { key: apiKey })).status).toBe(200)

    let asked = ""
    page.once("dialog", (d) => {
      asked = d.message()
      void d.accept()
    })
    await submit(row.getByRole("button", { name: `Revoke ${keyName}` }))
    expect(asked).toContain(`Revoke the key "${keyName}"`)
    expect(await text(page.locator(".flash.success"))).toContain("revoked")
    expect(await text(page.locator("tr", { hasText: keyName }).locator(".state"))).toBe("revoked")
    const after = await request(service.url, "/api/v1", { key: apiKey })
    expect(after.status).toBe(401)
    await shot("06-key-revoked")
  })

  let endpointUrl = ""

  it("adds an endpoint to the HTTPS receiver: the secret shown once, a test event and the receiver's answer", async () => {
    receiver.reply("/hook", { status: 200, body: "thanks from the receiver" })
    await go("/admin/webhooks")
    await page.getByLabel("Name", { exact: true }).fill("Safety dashboard")
    await page.getByLabel("Address").fill(receiver.url("/hook"))
    await page.getByRole("checkbox", { name: /An incident is reported/ }).check()
    await page.getByRole("checkbox", { name: /A corrective action is raised/ }).check()
    await submit(page.getByRole("button", { name: "Add endpoint" }))
    const secret = ((await page.locator("#new-secret").textContent()) ?? "").trim()
    expect(secret).toMatch(/^whsec_/)
    await shot("07-endpoint-added")
    await expectAccessible(page, "webhooks: endpoint added, secret shown once")
    await page.getByRole("link", { name: "Open the endpoint" }).click()
    await page.waitForURL(/\/admin\/webhooks\/endpoints\/[0-9a-f-]{36}$/)
    endpointUrl = page.url()
    expect(await page.content()).not.toContain(secret)

    await submit(page.getByRole("button", { name: "Send test event" }))
    expect(await text(page.locator(".flash.success"))).toContain("the receiver answered HTTP 200")
    expect(await text(page.locator(".flash .answer"))).toBe("thanks from the receiver")
    const ping = receiver.requests.find((r) => r.headers["service-event"] === "ping")
    expect(ping).toBeDefined()
    expect(ping!.headers["service-signature"]).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/)
    await shot("08-endpoint-test-event")
    await expectAccessible(page, "endpoint: test event result")
    // An answer with a NUL character in it is shown (as U+FFFD), not a failure of the page.
    receiver.reply("/hook", { status: 200, body: "ok\u0000then more" })
    await submit(page.getByRole("button", { name: "Send test event" }))
    expect(await text(page.locator(".flash .answer"))).toBe("ok\uFFFDthen more")
    receiver.reply("/hook", { status: 200, body: "thanks from the receiver" })
  })

  it("a real event is delivered and listed; Send Again sends it once more with the same delivery id", async () => {
    await insertIncident(db.sql, company.id, { title: "Scaffold plank cracked" })
    const first = await waitFor(
      () => receiver.requests.find((r) => r.headers["service-event"] === "incident.created"),
      "the incident.created delivery"
    )
    const deliveryId = String(first.headers["service-delivery"])
    await waitFor(
      async () =>
        (await db.sql`select 1 from service.webhook_deliveries where id = ${deliveryId} and state = 'succeeded'`)
          .length > 0,
      "the delivery recorded"
    )
    await page.goto(endpointUrl)
    const row = page.locator(`tr[data-delivery-id="${deliveryId}"]`)
    expect(await text(row.locator('td[data-label="Event"]'))).toBe("incident.created")
    expect(await text(row.locator(".state"))).toBe("succeeded")
    expect(await text(row.locator('td[data-label="Last answer"]'))).toContain("HTTP 200")
    await shot("09-endpoint-deliveries")
    await expectAccessible(page, "endpoint: deliveries")

    await submit(row.getByRole("button", { name: /Send again/i }))
    expect(await text(page.locator(".flash.success"))).toContain("being sent again")
    await waitFor(
      () => receiver.requests.filter((r) => r.headers["service-delivery"] === deliveryId).length === 2,
      "Send Again to arrive"
    )
    await waitFor(async () => {
      const [d] = await db.sql<
        { attempts: number; state: string }[]
      >`select attempts, state from service.webhook_deliveries where id = ${deliveryId}`
      return d!.attempts === 2 && d!.state === "succeeded"
    }, "the second attempt recorded")
    await page.reload()
    expect(await text(page.locator(`tr[data-delivery-id="${deliveryId}"] td[data-label="Attempts"]`))).toBe("2")
    await shot("10-endpoint-sent-again")
  })

  it("edits the endpoint, rotates its secret (shown once), and turns a switched-off endpoint on, with the reason shown", async () => {
    await page.goto(endpointUrl)
    await page.getByLabel("Name", { exact: true }).fill("Safety dashboard (prod)")
    await page.getByRole("checkbox", { name: /A corrective action is raised/ }).uncheck()
    await submit(page.getByRole("button", { name: "Save changes" }))
    expect(await text(page.locator(".flash.success"))).toContain('"Safety dashboard (prod)" saved')
    expect(await text(page.getByRole("heading", { level: 1 }))).toBe('Endpoint "Safety dashboard (prod)"')

    // A refused change keeps what was typed and says why, in the admin API's words.
    await page.getByLabel("Address").fill("https://10.0.0.7/hook")
    const refused = await submit(page.getByRole("button", { name: "Save changes" }))
    expect(refused.status()).toBe(400)
    expect(await text(page.locator("#edit-endpoint-error"))).toContain("url")
    expect(await page.getByLabel("Address").inputValue()).toBe("https://10.0.0.7/hook")
    await expectAccessible(page, "endpoint: refused edit")

    page.once("dialog", (d) => void d.accept())
    await submit(page.getByRole("button", { name: "Rotate secret" }))
    expect(((await page.locator("#new-secret").textContent()) ?? "").trim()).toMatch(/^whsec_/)
    // The default overlap: the old secret signs beside the new one for a day, and the page says until when.
    expect(await page.getByLabel("Old secret keeps signing for").inputValue()).toBe("24h")
    expect(await text(page.locator("dl.facts"))).toContain("Old secret signs until")
    await shot("11-endpoint-secret-rotated")

    const id = endpointUrl.split("/").pop()!
    await db.sql`update service.webhook_endpoints set enabled = false, disabled_at = now(), consecutive_failures = 15,
      disabled_reason = '15 deliveries in a row failed every attempt (last: http 503)' where id = ${id}`
    await page.goto(endpointUrl)
    await page
      .getByRole("heading", { name: "This endpoint is switched off" })
      .waitFor({ state: "visible", timeout: 5_000 })
    expect(await text(page.locator("section.flash.error"))).toContain(
      "15 deliveries in a row failed every attempt (last: http 503)"
    )
    await shot("12-endpoint-switched-off")
    await expectAccessible(page, "endpoint: switched off")
    await submit(page.getByRole("button", { name: "Turn On" }))
    expect(await text(page.locator(".flash.success"))).toContain("is on again")
    expect(await page.getByRole("heading", { name: "This endpoint is switched off" }).count()).toBe(0)
    expect(
      (await db.sql<{ enabled: boolean }[]>`select enabled from service.webhook_endpoints where id = ${id}`)[0]!.enabled
    ).toBe(true)
  })

  it("lists the subscriptions keys made through the API; turns one off and deletes one", async () => {
    await go("/admin/keys")
    await page.getByLabel("Name", { exact: true }).fill("Zapier")
    await page.getByRole("button", { name: "Tick all / none" }).click()
    await page.getByRole("checkbox", { name: /Webhooks permission/ }).check()
    await submit(page.getByRole("button", { name: "Create key" }))
    const key = ((await page.locator("#new-key").textContent()) ?? "").trim()
    for (const event of ["incident.created", "permit.approved"]) {
      const r = await request(service.url, "/api/v1/hooks", {
        key,
        method: "POST",
        body: JSON.stringify({ url: receiver.url("/zap"), event })
      })
      expect(r.status, r.text).toBe(201)
    }
    await go("/admin/webhooks")
    const section = page.locator("#subscriptions")
    await section.getByRole("heading", { name: "Key Zapier" }).waitFor({ state: "visible", timeout: 5_000 })
    const permit = section.locator("tr", { hasText: "permit.approved" })
    await submit(permit.getByRole("button", { name: /Turn off/ }))
    expect(await text(page.locator(".flash.success"))).toContain("turned off")
    expect(await text(page.locator("#subscriptions tr", { hasText: "permit.approved" }).locator(".state"))).toBe("Off")
    await shot("13-webhooks-subscriptions")
    await expectAccessible(page, "webhooks: list and subscriptions")
    page.once("dialog", (d) => void d.accept())
    await submit(
      page.locator("#subscriptions tr", { hasText: "incident.created" }).getByRole("button", { name: /Delete/ })
    )
    expect(await text(page.locator(".flash.success"))).toContain("Subscription deleted")
    expect(await page.locator("#subscriptions tr", { hasText: "incident.created" }).count()).toBe(0)
    const hooks = await request(service.url, "/api/v1/hooks", { key })
    expect(hooks.json.data.map((h: { event: string; active: boolean }) => [h.event, h.active])).toEqual([
      ["permit.approved", false]
    ])
  })

  it("shows the activity log newest first, filtered by kind", async () => {
    await go("/admin/activity")
    const kinds = await page.locator("#activity tbody tr td[data-label='What']").allTextContents()
    expect(kinds[0]).toBe("subscription.deleted")
    expect(kinds).toEqual(
      expect.arrayContaining([
        "key.created",
        "key.revoked",
        "endpoint.created",
        "endpoint.tested",
        "delivery.resent",
        "admin_token.created"
      ])
    )
    await shot("14-activity")
    await expectAccessible(page, "activity log")
    await page.getByLabel("Kind").selectOption("endpoint")
    await submit(page.getByRole("button", { name: "Filter" }))
    expect(page.url()).toBe(`${service.url}/admin/activity?kind=endpoint`)
    const filtered = await page.locator("#activity tbody tr td[data-label='What']").allTextContents()
    expect(filtered.length).toBeGreaterThan(3)
    expect(filtered.every((k) => k.startsWith("endpoint."))).toBe(true)
    expect(filtered[0]).toBe("endpoint.enabled")
    await shot("15-activity-filtered")
  })

  it("refuses forms that hostile pages on other loopback origins submit, and nothing changes", async () => {
    const [victim] = await db.sql<{ id: string }[]>`select id::text from service.api_keys where name = 'Zapier'`
    const keysBefore = await db.sql`select id, revoked_at from service.api_keys order by id`
    const cases = [
      // Another site: SameSite=Strict keeps the cookie home, and the Origin check refuses.
      {
        name: "cross-site",
        host: "localhost",
        action: () => `${service.url}/admin/keys`,
        fields: () => ({ name: "Evil", read: "incidents", expires: "never" })
      },
      // The same site on another port: the cookie goes along, the Origin check still refuses.
      {
        name: "same-site",
        host: "127.0.0.1",
        action: () => `${service.url}/admin/keys/${victim!.id}/revoke`,
        fields: () => ({ csrf: "a".repeat(43) })
      }
    ]
    for (const c of cases) {
      const hostile = await hostileServer(c.host, c.action, c.fields)
      try {
        const hostilePage = await context.newPage()
        const [response] = await Promise.all([
          hostilePage.waitForNavigation({ url: (u) => u.toString().startsWith(service.url) }),
          // The page leaves itself as it loads; its own navigation may count as interrupted.
          hostilePage.goto(hostile.url).catch(() => null)
        ])
        expect(response!.status(), c.name).toBe(403)
        expect(await text(hostilePage.getByRole("heading", { level: 1 }))).toBe("Request refused")
        expect(await text(hostilePage.getByRole("alert"))).toContain("This form was refused")
        await shot(`16-refused-${c.name}`, hostilePage)
        await expectAccessible(hostilePage, `refused page (${c.name})`)
        await hostilePage.close()
      } finally {
        await hostile.close()
      }
    }
    expect(await db.sql`select id, revoked_at from service.api_keys order by id`).toEqual(keysBefore)
    expect(await db.sql`select 1 from service.api_keys where name = 'Evil'`).toHaveLength(0)
    // Still signed in: the refused forms did not end the session.
    await go("/admin/keys")
    expect(page.url()).toBe(`${service.url}/admin/keys`)
  })

  it("is usable on a phone and by keyboard: no sideways scrolling, labels on every field, a skip link first", async () => {
    await page.setViewportSize({ width: 390, height: 844 })
    for (const [path, name] of [
      ["/admin/keys", "17-phone-keys"],
      ["/admin/webhooks", "18-phone-webhooks"],
      [new URL(endpointUrl).pathname, "19-phone-endpoint"],
      ["/admin/activity", "20-phone-activity"]
    ] as const) {
      await go(path)
      const overflow = await page.evaluate<number>(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
      )
      expect(overflow, path).toBeLessThanOrEqual(0)
      const unlabelled = await page.evaluate<ReadonlyArray<string>>(
        `[...document.querySelectorAll("input:not([type=hidden]), select, textarea")]
          .filter((el) => el.labels.length === 0 && !el.getAttribute("aria-label"))
          .map((el) => el.outerHTML)`
      )
      expect(unlabelled, path).toEqual([])
      await shot(name)
      await expectAccessible(page, `phone: ${path}`)
    }
    await page.setViewportSize({ width: 1280, height: 900 })
    await go("/admin/keys")
    await page.keyboard.press("Tab")
    expect(await page.evaluate<string | undefined>("document.activeElement?.textContent")).toBe("Skip to content")
    await page.keyboard.press("Tab")
    expect(await page.evaluate<string | undefined>("document.activeElement?.textContent")).toBe("API keys")
    // Everything loaded under the pages' Content-Security-Policy: no violations, no script errors.
    expect(consoleErrors).toEqual([])
  })

  it("deletes the endpoint after a confirmation", async () => {
    await page.goto(endpointUrl)
    let asked = ""
    page.once("dialog", (d) => {
      asked = d.message()
      void d.accept()
    })
    await submit(page.getByRole("button", { name: "Delete endpoint" }))
    expect(asked).toContain('Delete the endpoint "Safety dashboard (prod)"')
    expect(page.url()).toBe(`${service.url}/admin/webhooks`)
    expect(await text(page.locator(".flash.success"))).toContain('Endpoint "Safety dashboard (prod)" deleted')
    expect(await db.sql`select 1 from service.webhook_endpoints`).toHaveLength(0)
    const gone = await page.goto(endpointUrl)
    expect(gone!.status()).toBe(404)
  })

  it("signs out; the pages then need signing in again", async () => {
    await go("/admin/keys")
    await submit(page.getByRole("button", { name: "Sign out" }))
    expect(page.url()).toBe(`${service.url}/admin/sign-in?ended=signed-out`)
    expect(await text(page.getByRole("status"))).toContain("You signed out")
    expect((await context.cookies(service.url)).some((c) => c.name === "__Host-srs_admin")).toBe(false)
    await go("/admin/webhooks")
    expect(page.url()).toBe(`${service.url}/admin/sign-in?next=%2Fadmin%2Fwebhooks`)
  })
})
