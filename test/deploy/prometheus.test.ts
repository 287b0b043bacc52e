// The alert rules shipped in deploy/prometheus and the Grafana dashboard in deploy/grafana: promtool (Debian's
// prometheus package; CI installs it, see .ci/run) checks the rules and runs their unit tests
// (alerts.test.yml: each alert quiet while things are fine, firing once its condition held);
// every metric the rules and the dashboard name is one the service exports, with the labels
// they use; and the rules cover what an operator must hear about.
import { execFile, spawnSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { makeServiceMetrics } from "../../src/faces/ops/metrics.ts"

const DIR = fileURLToPath(new URL("../../deploy/prometheus/", import.meta.url))
const ALERTS = `${DIR}alerts.yml`
const DASHBOARD = fileURLToPath(new URL("../../deploy/grafana/dashboards/safety-records-service.json", import.meta.url))

const PROMTOOL = process.env.PROMTOOL_PATH ?? "promtool"
const hasPromtool = spawnSync(PROMTOOL, ["--version"]).status === 0
if (!hasPromtool) {
  console.warn(
    "test/deploy/prometheus.test.ts: SKIPPED: no promtool found (set PROMTOOL_PATH, or `apt-get install prometheus`); the alert rules were not checked by promtool. CI installs it (.ci/run)."
  )
}

const promtool = (...args: string[]) =>
  new Promise<{ code: number; output: string }>((resolve) =>
    execFile(PROMTOOL, args, { cwd: DIR, timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, output: stdout + stderr })
    )
  )

const rules = readFileSync(ALERTS, "utf8")
const alertNames = [...rules.matchAll(/^\s*- alert: (\w+)$/gm)].map((m) => m[1]!)
const expressions = [...rules.matchAll(/^\s*expr: (.+)$/gm)].map((m) => m[1]!)
const dashboard = JSON.parse(readFileSync(DASHBOARD, "utf8")) as {
  panels: Array<{ type: string; title: string; targets?: Array<{ expr: string }> }>
}
const panelExpressions = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr))

/** The metric families an expression names, with the label names it matches on or groups by. */
const namedIn = (expr: string) =>
  [...expr.matchAll(/\b((?:srs|process|nodejs)_[a-z0-9_]+)(?:\{([^}]*)\})?/g)].map((m) => ({
    family: m[1]!.replace(/_(bucket|sum|count)$/, ""),
    sample: m[1]!,
    labels: [...(m[2] ?? "").matchAll(/([a-z_]+)\s*(?:=~|!=|!~|=)/g)].map((l) => l[1]!)
  }))

describe.skipIf(!hasPromtool)("alert rules, by promtool", () => {
  it("pass promtool check rules", async () => {
    const r = await promtool("check", "rules", ALERTS)
    expect(r.output).toContain(`SUCCESS: ${alertNames.length} rules found`)
    expect(r.code).toBe(0)
  })

  it("load in the compose file's Prometheus configuration, which scrapes the operations port", async () => {
    const r = await promtool("check", "config", "prometheus.yml")
    expect(r.output).toContain("SUCCESS")
    expect(r.code).toBe(0)
    expect(readFileSync(`${DIR}prometheus.yml`, "utf8")).toContain('targets: ["service-a:9464", "service-b:9464"]')
  })

  it("pass their unit tests: quiet while things are fine, firing once the condition held", async () => {
    const r = await promtool("test", "rules", "alerts.test.yml")
    expect(r.output).toContain("SUCCESS")
    expect(r.code).toBe(0)
  })
})

describe("alert rules and dashboard", () => {
  it("cover the slot's WAL, a lost slot, no capture leader, lag, a stall, records held in quarantine, an app table that no longer fits, old pending deliveries, endpoints switched off, circuits open long, 5xx, a read replica skipped long and a process the schema fence stopped", () => {
    expect(alertNames).toEqual([
      "SrsReplicationSlotWalNearLimit",
      "SrsReplicationSlotLost",
      "SrsNoCaptureLeader",
      "SrsCaptureLagHigh",
      "SrsCaptureStalled",
      "SrsCaptureQuarantined",
      "SrsCaptureContractBroken",
      "SrsOldestPendingDeliveryOld",
      "SrsEndpointSwitchedOff",
      "SrsWebhookCircuitOpen",
      "SrsHttp5xxRate",
      "SrsReadReplicaSkipped",
      "SrsProcessFenced"
    ])
    const tested = readFileSync(`${DIR}alerts.test.yml`, "utf8")
    for (const name of alertNames) expect(tested, name).toContain(`alertname: ${name}`)
  })

  it("name only metrics the service exports, with labels they have", async () => {
    const m = makeServiceMetrics()
    const families = new Map((await m.registry.prom.getMetricsAsJSON()).map((f) => [f.name, f]))
    const labelsOf = (name: string) =>
      (m.registry.prom.getSingleMetric(name) as unknown as { labelNames?: ReadonlyArray<string> } | undefined)
        ?.labelNames ?? []
    const named = [...expressions, ...panelExpressions].flatMap(namedIn)
    expect(named.length).toBeGreaterThan(30)
    for (const n of named) {
      const family = families.get(n.family) ?? families.get(n.sample)
      expect(family, n.sample).toBeDefined()
      // job and instance are the scrape's; the rest must be the family's own
      for (const l of n.labels.filter((l) => l !== "job" && l !== "instance" && l !== "le"))
        expect(labelsOf(family!.name), `${n.sample}{${l}}`).toContain(l)
    }
    // every panel queries something, and the dashboard shows every alert's metric
    for (const p of dashboard.panels.filter((p) => p.type !== "row"))
      expect(p.targets?.length ?? 0, p.title).toBeGreaterThan(0)
    const shown = new Set(panelExpressions.flatMap(namedIn).map((n) => n.family))
    for (const n of expressions.flatMap(namedIn)) expect(shown, n.family).toContain(n.family)
  })
})
