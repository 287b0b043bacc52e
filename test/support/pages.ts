// Shared by the admin pages' tests: the real routes (read API, admin API, admin pages) in
// this process, and a small cookie-keeping client that submits forms as a browser on the
// same origin would (Origin, Sec-Fetch-Site, the CSRF token from the page).
import { spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import type { Page } from "playwright-core"
import type { WebhookDeps } from "../../src/webhooks/engine/settings.ts"
import { request, type Answer } from "./http.ts"
import { freePort } from "./net.ts"
import { startServer, type TestServer } from "./server.ts"

export const startWebServer = (databaseUrl: string, webhooks: Partial<WebhookDeps> = {}): Promise<TestServer> =>
  startServer(databaseUrl, { rateLimit: 1_000_000 }, { webhooks, pages: true })

/** The value of a hidden csrf field in a page. */
export const csrfOf = (page: string): string => {
  const m = /name="csrf" value="([A-Za-z0-9_-]+)"/.exec(page)
  if (m === null) throw new Error(`no csrf field in the page:\n${page.slice(0, 2000)}`)
  return m[1]!
}

export interface WebClient {
  readonly cookies: Map<string, string>
  readonly get: (path: string) => Promise<Answer>
  /** A form POST; by default as a same-origin page would send it, with the CSRF token of the last page. */
  readonly post: (
    path: string,
    fields: Record<string, string | ReadonlyArray<string>>,
    options?: {
      readonly headers?: Record<string, string>
      readonly csrf?: string | null
      readonly contentType?: string
    }
  ) => Promise<Answer>
  readonly signIn: (token: string) => Promise<Answer>
  /** The CSRF token of the last page that had one. */
  readonly csrf: () => string
}

export const webClient = (base: string): WebClient => {
  const cookies = new Map<string, string>()
  let lastCsrf: string | undefined
  const origin = new URL(base).origin
  const remember = (answer: Answer) => {
    const set = answer.headers.get("set-cookie")
    if (set !== null) {
      const [pair, ...attrs] = set.split(";")
      const eq = pair!.indexOf("=")
      const name = pair!.slice(0, eq).trim()
      const value = pair!.slice(eq + 1).trim()
      if (attrs.some((a) => a.trim().toLowerCase() === "max-age=0")) cookies.delete(name)
      else cookies.set(name, value)
    }
    const m = /name="csrf" value="([A-Za-z0-9_-]+)"/.exec(answer.text)
    if (m !== null) lastCsrf = m[1]
    return answer
  }
  const cookieHeader = (): Record<string, string> =>
    cookies.size === 0 ? {} : { cookie: [...cookies.entries()].map(([k, v]) => `${k}=${v}`).join("; ") }
  const get = async (path: string) =>
    remember(await request(base, path, { headers: { ...cookieHeader(), "sec-fetch-site": "same-origin" } }))
  const post: WebClient["post"] = async (path, fields, options = {}) => {
    const body = new URLSearchParams()
    const csrf = options.csrf === undefined ? lastCsrf : options.csrf
    if (csrf !== null && csrf !== undefined) body.append("csrf", csrf)
    for (const [k, v] of Object.entries(fields))
      for (const item of typeof v === "string" ? [v] : v) body.append(k, item)
    return remember(
      await request(base, path, {
        method: "POST",
        headers: {
          ...cookieHeader(),
          "content-type": options.contentType ?? "application/x-www-form-urlencoded",
          origin,
          "sec-fetch-site": "same-origin",
          ...options.headers
        },
        body: body.toString()
      })
    )
  }
  return {
    cookies,
    get,
    post,
    signIn: async (token) => {
      await get("/admin/sign-in")
      return post("/admin/sign-in", { token })
    },
    csrf: () => {
      if (lastCsrf === undefined) throw new Error("no page with a csrf field yet")
      return lastCsrf
    }
  }
}

// -----------------------------------------------------------------------------
// The real service process (`npm start`'s src/main.ts) on a test database.

export interface ServiceProcess {
  readonly url: string
  /** The operations port: /metrics, the detailed /readyz. */
  readonly opsUrl: string
  readonly output: () => string
  /** SIGTERM, and waits for the exit (SIGKILL after a deadline). */
  readonly stop: () => Promise<void>
}

export const startService = async (env: Record<string, string>): Promise<ServiceProcess> => {
  const port = await freePort()
  const opsPort = await freePort()
  const child = spawn(process.execPath, [fileURLToPath(new URL("../../src/main.ts", import.meta.url))], {
    env: {
      ...process.env,
      LOG_LEVEL: "Warn",
      SEED_DEMO: "false",
      HOST: "127.0.0.1",
      PORT: String(port),
      OPS_PORT: String(opsPort),
      ...env
    },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  child.stdout!.on("data", (d) => (output += d))
  child.stderr!.on("data", (d) => (output += d))
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  const url = `http://127.0.0.1:${port}`
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    child.kill("SIGTERM")
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000)
    await exited
    clearTimeout(timer)
  }
  const deadline = Date.now() + 60_000
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the service exited (${child.exitCode}):\n${output.slice(-4000)}`)
    try {
      const r = await fetch(`http://127.0.0.1:${opsPort}/readyz`, { signal: AbortSignal.timeout(2_000) })
      // Ready, and capture streaming (the tests write app rows and expect their events).
      if (r.ok && ((await r.json()) as { capture: { streaming: boolean } }).capture.streaming) break
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) {
      await stop()
      throw new Error(`the service was not ready within 60 s:\n${output.slice(-4000)}`)
    }
    await new Promise((r) => setTimeout(r, 200))
  }
  return { url, opsUrl: `http://127.0.0.1:${opsPort}`, output: () => output, stop }
}

// -----------------------------------------------------------------------------
// Accessibility: axe-core's WCAG 2.0/2.1 A and AA rules on a page as the browser shows it.

const AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
let axeSource: string | undefined

/**
 * Runs axe-core in the page and fails, naming each violation (rule id, impact, the first
 * elements' selectors), if it finds any. axe is evaluated through the DevTools protocol,
 * not added as a <script>: the pages' Content-Security-Policy allows no inline script.
 */
export const expectAccessible = async (page: Page, where: string = page.url()): Promise<void> => {
  axeSource ??= readFileSync(join(dirname(createRequire(import.meta.url).resolve("axe-core")), "axe.min.js"), "utf8")
  if (!(await page.evaluate<boolean>("typeof window.axe === 'object'"))) await page.evaluate(axeSource)
  type Violation = {
    readonly id: string
    readonly impact: string | null
    readonly help: string
    readonly targets: ReadonlyArray<string>
  }
  const violations = await page.evaluate<ReadonlyArray<Violation>, ReadonlyArray<string>>(async (tags) => {
    // In the page (this file has no DOM types): axe.run(document, { runOnly: tags }).
    type Result = {
      violations: Array<{
        id: string
        impact?: string | null
        help: string
        nodes: Array<{ target: ReadonlyArray<unknown> }>
      }>
    }
    const { axe, document } = globalThis as unknown as {
      axe: { run: (context: unknown, options: { runOnly: Array<string> }) => Promise<Result> }
      document: unknown
    }
    const r = await axe.run(document, { runOnly: [...tags] })
    return r.violations.map((v) => ({
      id: v.id,
      impact: v.impact ?? null,
      help: v.help,
      targets: v.nodes.map((n) => n.target.map(String).join(" > "))
    }))
  }, AXE_TAGS)
  if (violations.length === 0) return
  const lines = violations.map((v) => {
    const more = v.targets.length > 3 ? ` (+${v.targets.length - 3} more)` : ""
    return `- ${v.id} [${v.impact ?? "no impact"}] ${v.help}: ${v.targets.length} node(s): ${v.targets.slice(0, 3).join(" | ")}${more}`
  })
  throw new Error(
    `${where}: ${violations.length} accessibility violation(s) (axe-core, ${AXE_TAGS.join(", ")}):\n${lines.join("\n")}`
  )
}

/** A Set-Cookie value's name=value and its attributes (in any order, as browsers read them). */
export const setCookieParts = (
  setCookie: string
): { readonly pair: string; readonly attributes: ReadonlyArray<string> } => {
  const [pair, ...attributes] = setCookie.split("; ")
  return { pair: pair!, attributes: attributes.sort() }
}

/** Every cookie of the admin pages has exactly these, besides Max-Age when it is deleted. */
export const OUR_ATTRIBUTES = ["HttpOnly", "Path=/", "SameSite=Strict", "Secure"]
