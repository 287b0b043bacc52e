// The portal and delivery health in headless Chromium (playwright-core, Debian's chromium)
// against the real service process (src/main.ts: capture, delivery, HTTP) on a test database,
// with a real HTTPS receiver on loopback. An admin makes a portal link on the keys page; a
// second browser opens it, sees only that key's subscriptions and a failed delivery, sends it
// again, and the receiver gets it under the same delivery id; the link opened again, a link
// after it expired, and a session and a link after the key was revoked: refused. The admin API
// and the CLI make links too. The charts of an endpoint with known outcomes show those counts;
// their screenshots go into docs/images/ with UPDATE_DOC_IMAGES=1 (every page's into
// test-output/portal/).
import { randomBytes, randomUUID } from "node:crypto"
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { chromium, type Browser, type BrowserContext, type Locator, type Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { portalCookie } from "../../../src/faces/pages/portal.ts"
import { parseColour, parseExpiresIn } from "../../../src/access/portal.ts"
import { waitFor as poll } from "../../support/wait.ts"
import { request } from "../../support/http.ts"
import { insertIncident, makeCompany } from "../../support/app.ts"
import { freshDatabase, type TestDatabase } from "../../support/db.ts"
import { startHttpsReceiver, type Receiver } from "../../support/https-receiver.ts"
import { runCli } from "../../support/cli.ts"
import { expectAccessible, startService, type ServiceProcess } from "../../support/pages.ts"

const CHROMIUM = (
  process.env.CHROMIUM_PATH ? [process.env.CHROMIUM_PATH] : ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
).find((p) => existsSync(p))
const SHOTS = fileURLToPath(new URL("../../../test-output/portal/", import.meta.url))
// The charts' screenshots in the docs are taken again with UPDATE_DOC_IMAGES=1; otherwise they go
// beside the others, so a run leaves the repository as it was.
const DOC_IMAGES = fileURLToPath(
  new URL(
    process.env.UPDATE_DOC_IMAGES === "1" ? "../../../docs/images/" : "../../../test-output/portal/",
    import.meta.url
  )
)

describe("pure", () => {
  it("a link lasts an hour unless said, at most a day", () => {
    expect(parseExpiresIn(undefined)).toEqual({ seconds: 3600 })
    expect(parseExpiresIn("15m")).toEqual({ seconds: 900 })
    expect(parseExpiresIn("24h")).toEqual({ seconds: 86400 })
    expect(parseExpiresIn(7200)).toEqual({ seconds: 7200 })
    expect(parseExpiresIn("25h")).toEqual({ error: expect.stringContaining("at most 24 hours") })
    expect(parseExpiresIn(86401)).toEqual({ error: expect.stringContaining("at most 24 hours") })
    expect(parseExpiresIn("10s")).toEqual({ error: expect.stringContaining("at least a minute") })
    expect(parseExpiresIn("soon")).toEqual({ error: expect.stringContaining("not a duration") })
  })
  it("a colour is #rrggbb", () => {
    expect(parseColour("#A3161B")).toEqual({ colour: "#a3161b" })
    expect(parseColour("#abc")).toEqual({ colour: "#aabbcc" })
    expect(parseColour("")).toEqual({ colour: null })
    expect(parseColour("red; x")).toEqual({ error: expect.stringContaining("not a colour") })
  })
  it("the session cookie is HttpOnly, SameSite=Strict, for /portal, and Secure behind TLS", () => {
    expect(portalCookie("abc", { secure: false })).toBe("srs_portal=abc; Path=/portal; HttpOnly; SameSite=Strict")
    expect(portalCookie("abc", { secure: true })).toBe(
      "srs_portal=abc; Path=/portal; HttpOnly; Secure; SameSite=Strict"
    )
    expect(() => portalCookie("a;b", { secure: true })).toThrow()
  })
})

if (CHROMIUM === undefined)
  console.warn("test/faces/pages/portal.test.ts: SKIPPED: no Chromium found (set CHROMIUM_PATH, or install chromium)")

const waitFor = <A>(check: () => A | Promise<A>, what: string, ms = 30_000) => poll(check, what, ms, 100)
const text = async (l: Locator): Promise<string> => ((await l.textContent({ timeout: 5_000 })) ?? "").trim()

describe.skipIf(CHROMIUM === undefined)("the portal in a browser", () => {
  let db: TestDatabase
  let receiver: Receiver
  let service: ServiceProcess
  let browser: Browser
  let admin: BrowserContext
  let adminPage: Page
  let company: { id: string; host: string }
  let adminToken: string
  let dir: string
  const adminEmail = "ada@portal-test.example"
  const env = () => ({ DATABASE_URL: db.url })
  const keys: Record<"ours" | "theirs", { id: string; key: string }> = {
    ours: { id: "", key: "" },
    theirs: { id: "", key: "" }
  }
  let subscriptionId = ""
  let failedDeliveryId = ""

  const shot = async (p: Page, name: string) => {
    await p.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true })
  }
  const submit = async (p: Page, button: Locator) => {
    const [response] = await Promise.all([p.waitForNavigation(), button.click()])
    return response!
  }
  const cli = async (args: ReadonlyArray<string>) => {
    const r = await runCli(args, env())
    expect(r.code, r.stderr).toBe(0)
    return JSON.parse(r.stdout)
  }
  /** A fresh browser (its own cookies): the integrator's. */
  const integrator = async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
    return { context, page: await context.newPage() }
  }
  /** Opens a portal link as its holder would: the page, then its one button. */
  const openLink = async (p: Page, url: string) => {
    const first = await p.goto(url)
    expect(first!.status()).toBe(200)
    return submit(p, p.getByRole("button", { name: "Open the portal" }))
  }

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true })
    mkdirSync(DOC_IMAGES, { recursive: true })
    dir = mkdtempSync(join(tmpdir(), "srs-portal-"))
    db = await freshDatabase()
    company = await makeCompany(db.sql, { host: "acme.portal.test" })
    await db.sql`update app.companies set name = 'Acme Construction' where id = ${company.id}`
    await db.sql`insert into app.users (company_id, name, email, role) values (${company.id}, 'Ada Admin', ${adminEmail}, 'admin')`
    receiver = await startHttpsReceiver()
    const caFile = join(dir, "ca.pem")
    writeFileSync(caFile, receiver.ca)
    service = await startService({
      DATABASE_URL: db.url,
      DATA_DIR: dir,
      REPLICATION_SLOT: `srs_portal_${randomBytes(4).toString("hex")}`,
      WEBHOOK_ALLOWED_NETWORKS: "127.0.0.0/8",
      NODE_EXTRA_CA_CERTS: caFile,
      SECRETS_KEY: randomBytes(32).toString("base64"),
      // One retry a second after the first attempt: a delivery fails within seconds.
      WEBHOOK_RETRY_SCHEDULE: "1s",
      CAPTURE_HEARTBEAT: "1 second"
    })
    adminToken = (await cli(["tokens", "create", "--as", adminEmail, "--name", "portal test", "--json"])).token
    for (const [which, name] of [
      ["ours", "Contractor BI"],
      ["theirs", "Other integration"]
    ] as const) {
      const k = await cli([
        "keys",
        "create",
        "--company",
        company.host,
        "--name",
        name,
        "--read",
        "all",
        "--webhooks",
        "--as",
        adminEmail,
        "--json"
      ])
      keys[which] = { id: k.id, key: k.key }
    }
    const sub = await request(service.url, "/api/v1/hooks", {
      key: keys.ours.key,
      method: "POST",
      body: JSON.stringify({ url: receiver.url("/contractor"), event: "incident.created" })
    })
    expect(sub.status, sub.text).toBe(201)
    subscriptionId = sub.json.id
    const theirs = await request(service.url, "/api/v1/hooks", {
      key: keys.theirs.key,
      method: "POST",
      body: JSON.stringify({ url: receiver.url("/someone-else"), event: "incident.created" })
    })
    expect(theirs.status, theirs.text).toBe(201)
    // The contractor's receiver is down: its delivery fails both attempts.
    receiver.reply("/contractor", { status: 503, body: "down for maintenance" })
    receiver.reply("/someone-else", { status: 200, body: "ok" })
    await insertIncident(db.sql, company.id, { title: "Ladder slipped" })
    failedDeliveryId = await waitFor(async () => {
      const [d] = await db.sql<{ id: string }[]>`
        select id::text from service.webhook_deliveries where subscription_id = ${subscriptionId} and state = 'failed'`
      return d?.id
    }, "the contractor's delivery failed")

    browser = await chromium.launch({ executablePath: CHROMIUM!, headless: true })
    admin = await browser.newContext({ viewport: { width: 1280, height: 900 } })
    adminPage = await admin.newPage()
    await adminPage.goto(`${service.url}/admin/sign-in`)
    await adminPage.getByLabel("Admin token").fill(adminToken)
    await submit(adminPage, adminPage.getByRole("button", { name: "Sign in" }))
  }, 180_000)

  afterAll(async () => {
    await browser?.close()
    await service?.stop()
    await receiver?.close()
    await db?.drop()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  let link = ""
  let portal: { context: BrowserContext; page: Page }

  it("an admin makes a portal link on the keys page: shown once, kept only as a hash", async () => {
    await adminPage.goto(`${service.url}/admin/keys`)
    const row = adminPage.locator(`tr[data-key-id="${keys.ours.id}"]`)
    await row.getByText("Portal link…").click()
    await row.getByLabel("Lasts").selectOption("1h")
    await row.getByLabel(/Name shown/).fill("Acme Partners")
    await row.getByLabel(/Colour/).fill("#a3161b")
    await expectAccessible(adminPage, "keys: portal link form")
    await submit(adminPage, row.getByRole("button", { name: "Make portal link" }))
    link = await text(adminPage.locator("#portal-link"))
    expect(link).toMatch(new RegExp(`^${service.url}/portal/[A-Za-z0-9_-]{43}$`))
    expect(await text(adminPage.locator(".once .warning"))).toContain("It works once")
    await shot(adminPage, "01-admin-portal-link")
    await expectAccessible(adminPage, "keys: portal link shown once")
    const token = link.slice(link.lastIndexOf("/") + 1)
    const rows = await db.sql<{ row: string }[]>`select row_to_json(l)::text as row from service.portal_links l`
    expect(rows).toHaveLength(1)
    expect(rows[0]!.row).not.toContain(token)
  })

  it("a second browser opens it once: a session cookie (HttpOnly, SameSite=Strict), a page of that key alone", async () => {
    portal = await integrator()
    const page = portal.page
    const consoleErrors: Array<string> = []
    page.on("pageerror", (e) => consoleErrors.push(e.message))
    const none = await page.goto(`${service.url}/portal`)
    expect(none!.status()).toBe(401)
    expect(await text(page.getByRole("alert"))).toContain("not signed in")
    await page.goto(link)
    expect(await text(page.locator("main"))).toContain("Contractor BI")
    await shot(page, "02-portal-open")
    await expectAccessible(page, "portal: open")
    const opened = await submit(page, page.getByRole("button", { name: "Open the portal" }))
    expect(opened.status()).toBe(200)
    expect(page.url()).toBe(`${service.url}/portal`)
    const cookie = (await portal.context.cookies(`${service.url}/portal`)).find((c) => c.name === "srs_portal")
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: "Strict", path: "/portal", secure: false })
    expect(await page.evaluate<string>("document.cookie")).toBe("")
    expect(await text(page.locator(".brand"))).toContain("Acme Partners")
    expect(await page.locator("svg.brand-bar rect").getAttribute("fill")).toBe("#a3161b")
    expect(await text(page.locator(".who"))).toContain("Contractor BI")
    // Only this key's subscription: not the other key's, no key secret, no admin side.
    const rows = page.locator("#subscriptions tbody tr")
    expect(await rows.count()).toBe(1)
    expect(await text(rows.first().locator('td[data-label="Address"]'))).toBe(receiver.url("/contractor"))
    const content = await page.content()
    expect(content).not.toContain("/someone-else")
    expect(content).not.toContain(keys.ours.key)
    expect(content).not.toContain("mk_")
    // No link to the admin side (the shared stylesheet aside).
    expect(content.replaceAll('href="/admin/assets/', "")).not.toContain('href="/admin')
    expect((await page.goto(`${service.url}/admin/keys`))!.url()).toContain("/admin/sign-in")
    await page.goBack()
    await shot(page, "03-portal-home")
    await expectAccessible(page, "portal: home")
    // The other key's subscription by its id: not found.
    const [other] = await db.sql<{ id: string }[]>`
      select id::text from service.webhook_subscriptions where key_id = ${keys.theirs.id}`
    const foreign = await page.goto(`${service.url}/portal/subscriptions/${other!.id}`)
    expect(foreign!.status()).toBe(404)
    expect(await page.content()).not.toContain("/someone-else")
    expect(consoleErrors).toEqual([])
  })

  it("sees the failed delivery with its attempts and health; Send Again reaches the receiver under the same delivery id", async () => {
    const page = portal.page
    await page.goto(`${service.url}/portal`)
    await submit(page, page.getByRole("link", { name: "incident.created" }))
    const row = page.locator(`tr[data-delivery-id="${failedDeliveryId}"]`)
    expect(await text(row.locator(".state"))).toBe("failed")
    expect(await row.locator("ol.attempts li").count()).toBe(2)
    expect(await text(row.locator("ol.attempts"))).toContain("HTTP 503")
    // The charts count it: one delivery today, failed.
    expect(await text(page.locator('#health-day [data-total="failed"]'))).toBe("1")
    expect(await text(page.locator('#health-week [data-total="failed"]'))).toBe("1")
    expect(await text(page.locator('#health-day [data-total="succeeded"]'))).toBe("0")
    await shot(page, "04-portal-subscription")
    await expectAccessible(page, "portal: subscription")
    // The delivery's own page: every attempt with the start of the receiver's answer.
    await submit(page, row.getByRole("link", { name: new RegExp(`^Delivery ${failedDeliveryId}`) }))
    const attempts = page.locator("#attempts tbody tr")
    expect(await attempts.count()).toBe(2)
    expect(await text(attempts.first().locator('td[data-label="Your receiver said"]'))).toBe("down for maintenance")
    expect(await text(attempts.first().locator('td[data-label="Answer"]'))).toBe("HTTP 503")
    await shot(page, "04b-portal-delivery")
    await expectAccessible(page, "portal: delivery")
    const [otherDelivery] = await db.sql<{ id: string }[]>`
      select d.id::text from service.webhook_deliveries d join service.webhook_subscriptions s on s.id = d.subscription_id
      where s.key_id = ${keys.theirs.id} limit 1`
    const foreignDelivery = await page.goto(
      `${service.url}/portal/subscriptions/${subscriptionId}/deliveries/${otherDelivery!.id}`
    )
    expect(foreignDelivery!.status()).toBe(404)
    await page.goto(`${service.url}/portal/subscriptions/${subscriptionId}`)

    const before = receiver.requests.filter((r) => r.path === "/contractor").length
    const first = receiver.requests.find((r) => r.path === "/contractor")!
    expect(first.headers["service-delivery"]).toBe(failedDeliveryId)
    receiver.reply("/contractor", { status: 200, body: "back up" })
    await submit(page, row.getByRole("button", { name: `Send again delivery ${failedDeliveryId}` }))
    expect(await text(page.locator(".flash.success"))).toContain(`Delivery ${failedDeliveryId}`)
    // Post/Redirect/Get: the subscription's page, which a reload does not send again.
    expect(page.url()).toBe(`${service.url}/portal/subscriptions/${subscriptionId}?sent=${failedDeliveryId}`)
    const again = await waitFor(
      () => receiver.requests.slice(before).find((r) => r.path === "/contractor"),
      "the delivery sent again"
    )
    expect(again.headers["service-delivery"]).toBe(failedDeliveryId)
    expect(again.headers["webhook-id"] ?? failedDeliveryId).toBe(failedDeliveryId)
    await waitFor(
      async () =>
        (await db.sql`select 1 from service.webhook_deliveries where id = ${failedDeliveryId} and state = 'succeeded'`)
          .length > 0,
      "the delivery recorded as succeeded"
    )
    await page.reload()
    expect(await text(page.locator(`tr[data-delivery-id="${failedDeliveryId}"] .state`))).toBe("succeeded")
    // Sent again, it counts as retried now (it took more than one attempt).
    expect(await text(page.locator('#health-day [data-total="retried"]'))).toBe("1")
    expect(await text(page.locator('#health-day [data-total="failed"]'))).toBe("0")
  })

  it("sends a test event and recovers since a time, each logged under the key's name", async () => {
    const page = portal.page
    const pings = receiver.requests.filter((r) => r.headers["service-event"] === "ping").length
    await submit(page, page.getByRole("button", { name: "Send test event" }))
    expect(await text(page.locator(".flash.success"))).toContain("the receiver answered HTTP 200")
    expect(receiver.requests.filter((r) => r.headers["service-event"] === "ping")).toHaveLength(pings + 1)
    await page.getByLabel(/Send again every failed delivery since/).fill(new Date(Date.now() - 3600_000).toISOString())
    await submit(page, page.getByRole("button", { name: "Recover" }))
    expect(await text(page.locator(".flash"))).toMatch(/Nothing to recover|Recovering/)
    await page.getByLabel(/Send again every failed delivery since/).fill("not a date")
    const bad = await submit(page, page.getByRole("button", { name: "Recover" }))
    expect(bad.status()).toBe(400)
    expect(await text(page.getByRole("alert"))).toContain("since must be")
    await expectAccessible(page, "portal: refused recovery")

    await adminPage.goto(`${service.url}/admin/activity`)
    const table = adminPage.locator("#activity")
    for (const kind of ["portal_link.created", "portal_link.opened", "delivery.resent", "subscription.tested"])
      expect(await table.locator("tr", { hasText: kind }).count(), kind).toBeGreaterThan(0)
    expect(
      await text(table.locator("tr", { hasText: "delivery.resent" }).first().locator('td[data-label="Who"]'))
    ).toBe("API key Contractor BI")
    await shot(adminPage, "05-admin-activity")
  })

  it("is usable on a phone and by keyboard", async () => {
    const page = portal.page
    await page.setViewportSize({ width: 390, height: 844 })
    for (const path of ["/portal", `/portal/subscriptions/${subscriptionId}`]) {
      await page.goto(service.url + path)
      const overflow = await page.evaluate<number>(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
      )
      expect(overflow, path).toBeLessThanOrEqual(0)
      await expectAccessible(page, `phone: ${path}`)
    }
    await shot(page, "06-phone-portal-subscription")
    // The skip link first, then the page's controls, each reachable by Tab.
    await page.goto(`${service.url}/portal`)
    await page.keyboard.press("Tab")
    expect(await page.evaluate<string>("document.activeElement.textContent")).toBe("Skip to content")
    let reached = false
    for (let i = 0; i < 10 && !reached; i++) {
      await page.keyboard.press("Tab")
      reached = (await page.evaluate<string>("document.activeElement.textContent")) === "incident.created"
    }
    expect(reached).toBe(true)
    await page.keyboard.press("Enter")
    await page.waitForURL(/\/portal\/subscriptions\//)
    await page.setViewportSize({ width: 1280, height: 900 })
  })

  it("refuses the link opened again, a link after it expired, and everything once the key is revoked", async () => {
    // Opened again, in another browser: refused on sight, with nothing spent or set.
    const again = await integrator()
    const reopened = await again.page.goto(link)
    expect(reopened!.status()).toBe(403)
    expect(await text(again.page.getByRole("alert"))).toContain("already opened")
    expect(await again.page.getByRole("button", { name: "Open the portal" }).count()).toBe(0)
    expect((await again.context.cookies(`${service.url}/portal`)).find((c) => c.name === "srs_portal")).toBeUndefined()
    await shot(again.page, "07-portal-reopened")
    await expectAccessible(again.page, "portal: refused")

    // The admin API makes links too: at most 24 hours, an hour unless said.
    const api = (body: unknown) =>
      request(service.url, `/admin/v1/keys/${keys.ours.id}/portal-links`, {
        method: "POST",
        headers: { authorization: `Bearer ${adminToken}` },
        body: JSON.stringify(body)
      })
    expect((await api({ expiresIn: "25h" })).status).toBe(400)
    const made = await api({})
    expect(made.status, made.text).toBe(201)
    expect(made.json.url).toMatch(new RegExp(`^${service.url}/portal/[A-Za-z0-9_-]{43}$`))
    const life = Date.parse(made.json.expiresAt) - Date.now()
    expect(life).toBeGreaterThan(3500_000)
    expect(life).toBeLessThanOrEqual(3600_000)
    // Two browsers with its page open: the first to press the button has it, the other is refused.
    // Without branding, it shows the company's name.
    const first = await integrator()
    const second = await integrator()
    expect((await second.page.goto(made.json.url))!.status()).toBe(200)
    expect(await text(second.page.locator(".brand"))).toContain("Acme Construction")
    expect((await openLink(first.page, made.json.url)).status()).toBe(200)
    const beaten = await submit(second.page, second.page.getByRole("button", { name: "Open the portal" }))
    expect(beaten.status()).toBe(403)
    expect(await text(second.page.getByRole("alert"))).toContain("already opened")
    // Its hour passes (the clock moved on, as far as the link is concerned): refused, and its
    // session ends with it.
    const later = (await api({ expiresIn: "10m" })).json
    await db.sql`update service.portal_links set expires_at = now() - interval '1 second' where id in (${made.json.id}, ${later.id})`
    const late = await integrator()
    const expired = await late.page.goto(later.url)
    expect(expired!.status()).toBe(403)
    expect(await text(late.page.getByRole("alert"))).toContain("expired")
    const ended = await first.page.reload()
    expect(ended!.status()).toBe(401)
    expect(await text(first.page.getByRole("alert"))).toContain("expired")

    // Signing out ends the session; the link stays spent.
    const leaver = await integrator()
    const leaving = (await api({})).json.url as string
    expect((await openLink(leaver.page, leaving)).status()).toBe(200)
    await submit(leaver.page, leaver.page.getByRole("button", { name: "Sign out" }))
    expect(await text(leaver.page.getByRole("heading", { level: 1 }))).toBe("Signed out")
    expect((await leaver.page.goto(`${service.url}/portal`))!.status()).toBe(401)
    expect((await leaver.page.goto(leaving))!.status()).toBe(403)
    await leaver.context.close()

    // The CLI makes one; opened, it is a session. The key revoked: the session and an unopened link end.
    const fromCli = await cli([
      "keys",
      "portal-link",
      keys.ours.id,
      "--expires",
      "2h",
      "--as",
      adminEmail,
      "--base-url",
      service.url,
      "--json"
    ])
    expect(fromCli.url).toMatch(new RegExp(`^${service.url}/portal/[A-Za-z0-9_-]{43}$`))
    expect(Date.parse(fromCli.expiresAt) - Date.now()).toBeGreaterThan(7100_000)
    const unopened = (await api({ expiresIn: 600 })).json.url as string
    const holder = await integrator()
    expect((await openLink(holder.page, fromCli.url)).status()).toBe(200)
    expect(await holder.page.locator("#subscriptions tbody tr").count()).toBe(1)
    await adminPage.goto(`${service.url}/admin/keys`)
    adminPage.once("dialog", (d) => void d.accept())
    await submit(
      adminPage,
      adminPage.locator(`tr[data-key-id="${keys.ours.id}"]`).getByRole("button", { name: "Revoke Contractor BI" })
    )
    const after = await holder.page.reload()
    expect(after!.status()).toBe(401)
    expect(await text(holder.page.getByRole("alert"))).toContain("revoked")
    const post = await integrator()
    const closed = await post.page.goto(unopened)
    expect(closed!.status()).toBe(403)
    expect(await text(post.page.getByRole("alert"))).toContain("revoked")
    // No new link for a revoked key.
    expect((await api({})).status).toBe(409)
    for (const c of [again, first, second, late, holder, post]) await c.context.close()
    await portal.context.close()
  })

  it("an endpoint's charts show its known outcomes (screenshots for the docs)", async () => {
    // A week of deliveries to an endpoint, as the engine leaves them: each hour h back, 20 + h % 7
    // delivered at once, every 5th hour 3 retried, every 11th 2 failed; answers 80-400 ms.
    const endpoint = randomUUID()
    await db.sql`insert into service.webhook_endpoints (id, company_id, name, url, events, secret)
      values (${endpoint}, ${company.id}, 'Incident board', ${receiver.url("/board")}, array['incident.created'], '\\x00')`
    await db.sql.unsafe(
      `insert into service.webhook_deliveries (id, event_id, company_id, event, endpoint_id, origin, state, attempts,
         created_at, finished_at, last_attempt_at, last_status, last_duration_ms)
       select gen_random_uuid(), gen_random_uuid(), $1, 'incident.created', $2, 'receiver.test:443', s.state, s.attempts,
         t, t, t, case when s.state = 'failed' then 503 else 200 end, 80 + (h * 37 + n * 13) % 320
       from generate_series(1, 166) h, lateral (select now() - h * interval '1 hour' as t) x,
         lateral generate_series(1, 20 + h % 7 + case when h % 5 = 0 then 3 else 0 end + case when h % 11 = 0 then 2 else 0 end) n,
         lateral (select case when n > 20 + h % 7 + case when h % 5 = 0 then 3 else 0 end then 'failed'
                              else 'succeeded' end as state,
                         case when n > 20 + h % 7 + case when h % 5 = 0 then 3 else 0 end then 6
                              when n > 20 + h % 7 then 2 else 1 end as attempts) s`,
      [company.id, endpoint]
    )
    // What the charts must count: the last 24 hours are this hour and the 23 before it; the 7
    // days start at midnight UTC six days ago.
    const count = (from: string) => db.sql<{ succeeded: number; retried: number; failed: number }[]>`
      select count(*) filter (where state = 'succeeded' and attempts = 1)::int as succeeded,
        count(*) filter (where state = 'succeeded' and attempts > 1)::int as retried,
        count(*) filter (where state = 'failed')::int as failed
      from service.webhook_deliveries where endpoint_id = ${endpoint} and created_at >= ${db.sql.unsafe(from)}`
    const [day] = await count("date_bin('1 hour', now(), 'epoch') - interval '23 hours'")
    const [week] = await count("date_bin('1 day', now(), 'epoch') - interval '6 days'")
    expect(day!.failed + week!.retried).toBeGreaterThan(0)
    await adminPage.goto(`${service.url}/admin/webhooks/endpoints/${endpoint}`)
    for (const [chart, counts] of [
      ["health-day", day!],
      ["health-week", week!]
    ] as const)
      for (const o of ["succeeded", "retried", "failed"] as const)
        expect(await text(adminPage.locator(`#${chart} [data-total="${o}"]`)), `${chart} ${o}`).toBe(
          counts[o].toLocaleString("en")
        )
    await adminPage.locator("#health").screenshot({ path: join(DOC_IMAGES, "delivery-health.png") })
    await adminPage.setViewportSize({ width: 390, height: 844 })
    await adminPage.locator("#health-day").screenshot({ path: join(DOC_IMAGES, "delivery-health-phone.png") })
    await adminPage.setViewportSize({ width: 1280, height: 900 })
    await expectAccessible(adminPage, "endpoint: charts")
    // The other key's subscription has its page with its charts: one delivery, delivered at once.
    const [theirs] = await db.sql<{ id: string }[]>`
      select id::text from service.webhook_subscriptions where key_id = ${keys.theirs.id}`
    await adminPage.goto(`${service.url}/admin/webhooks`)
    await submit(adminPage, adminPage.getByRole("link", { name: /^incident\.created to .*someone-else/ }))
    expect(adminPage.url()).toBe(`${service.url}/admin/webhooks/subscriptions/${theirs!.id}`)
    expect(await text(adminPage.locator('#health-week [data-total="succeeded"]'))).toBe("1")
    await expectAccessible(adminPage, "subscription: charts")
    // On a phone, nothing scrolls sideways.
    await adminPage.setViewportSize({ width: 390, height: 844 })
    for (const path of [
      `/admin/webhooks/endpoints/${endpoint}`,
      `/admin/webhooks/subscriptions/${theirs!.id}`,
      "/admin/status"
    ]) {
      await adminPage.goto(service.url + path)
      const overflow = await adminPage.evaluate<number>(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
      )
      expect(overflow, path).toBeLessThanOrEqual(0)
    }
    await adminPage.setViewportSize({ width: 1280, height: 900 })
    await adminPage.goto(`${service.url}/admin/status`)
    expect(await adminPage.locator("#quarantine-count").getAttribute("data-count")).toBe("0")
    await adminPage.locator("main").screenshot({ path: join(DOC_IMAGES, "admin-status.png") })
    await expectAccessible(adminPage, "status")
  })
})
