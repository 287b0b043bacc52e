// The Grafana dashboard of deploy/grafana, as docker-compose.yml provisions it: every panel's
// query names a metric family that a running service (src/main.ts on a test database) exports
// on its operations port's /metrics; the compose file mounts the provisioning and the
// dashboards where Grafana reads them, and the data source the dashboard picks is the one
// provisioned. Loading it in Grafana itself needs Docker (docs/operations.md#grafana).
import { randomBytes } from "node:crypto"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeCompany } from "../support/app.ts"
import { freshDatabase, type TestDatabase } from "../support/db.ts"
import { startService, type ServiceProcess } from "../support/pages.ts"

const ROOT = fileURLToPath(new URL("../../", import.meta.url))
const GRAFANA = join(ROOT, "deploy/grafana")
const DASHBOARD_FILE = join(GRAFANA, "dashboards/safety-records-service.json")

type Target = { readonly expr: string; readonly datasource?: { readonly uid: string } }
type Panel = {
  readonly id: number
  readonly type: string
  readonly title: string
  readonly datasource?: { readonly type: string; readonly uid: string }
  readonly targets?: ReadonlyArray<Target>
}
const dashboard = JSON.parse(readFileSync(DASHBOARD_FILE, "utf8")) as {
  readonly uid: string
  readonly panels: ReadonlyArray<Panel>
  readonly templating: { readonly list: ReadonlyArray<{ name: string; query: unknown; current?: { value?: string } }> }
}
const panels = dashboard.panels.filter((p) => p.type !== "row")

/** The metric names a PromQL expression uses: identifiers followed by a selector, a range or the end of an argument. */
const metricsIn = (expr: string): ReadonlyArray<string> =>
  [...expr.matchAll(/\b([a-z_][a-z0-9_]*_(?:total|seconds|bytes|events|info|[a-z]+))\b(?=\s*(?:\{|\[|\)|$|\s|==|\/))/g)]
    .map((m) => m[1]!)
    .filter((name) => !["histogram_quantile", "label_values"].includes(name))

/** A sample's name to its family: histograms' _bucket, _sum and _count are the histogram's. */
const familyOf = (name: string, families: ReadonlySet<string>) =>
  families.has(name) ? name : name.replace(/_(bucket|sum|count)$/, "")

describe("the Grafana dashboard", () => {
  let db: TestDatabase
  let service: ServiceProcess
  let dir: string
  let exported: Set<string>

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "srs-grafana-"))
    db = await freshDatabase()
    await makeCompany(db.sql, { host: "acme.grafana.test" })
    service = await startService({
      DATABASE_URL: db.url,
      DATA_DIR: dir,
      REPLICATION_SLOT: `srs_grafana_${randomBytes(4).toString("hex")}`,
      SECRETS_KEY: randomBytes(32).toString("base64")
    })
    // A request first, so the HTTP families have samples as well as their help.
    await fetch(`${service.url}/api/v1/incidents`)
    const text = await (await fetch(`${service.opsUrl}/metrics`)).text()
    exported = new Set([...text.matchAll(/^# TYPE (\S+) \S+$/gm)].map((m) => m[1]!))
  }, 120_000)

  afterAll(async () => {
    await service?.stop()
    await db?.drop()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  it("finds the metric names in a query", () => {
    expect(
      metricsIn(
        'histogram_quantile(0.95, sum by (le) (rate(srs_delivery_attempt_duration_seconds_bucket{job=~"$job"}[5m])))'
      )
    ).toEqual(["srs_delivery_attempt_duration_seconds_bucket"])
    expect(metricsIn('process_resident_memory_bytes{job=~"$job"}')).toEqual(["process_resident_memory_bytes"])
    expect(metricsIn('max by (status) (srs_capture_slot_wal_status{job=~"$job"}) == 1')).toEqual([
      "srs_capture_slot_wal_status"
    ])
    expect(metricsIn("sum(rate(srs_made_up_total[5m]))")).toEqual(["srs_made_up_total"])
  })

  it("queries in every panel only metrics the running service exports on /metrics", () => {
    expect(exported.size).toBeGreaterThan(40)
    expect(panels.length).toBeGreaterThan(25)
    const missing: Array<string> = []
    let named = 0
    for (const p of panels) {
      expect(p.targets?.length ?? 0, p.title).toBeGreaterThan(0)
      for (const t of p.targets ?? []) {
        const metrics = metricsIn(t.expr)
        expect(metrics.length, `${p.title}: ${t.expr}`).toBeGreaterThan(0)
        for (const m of metrics) {
          named++
          if (!exported.has(familyOf(m, exported))) missing.push(`${p.title}: ${m}`)
        }
      }
    }
    expect(missing).toEqual([])
    expect(named).toBeGreaterThan(40)
    // The job picker too.
    const job = dashboard.templating.list.find((v) => v.name === "job")!
    for (const m of metricsIn(String((job.query as { query: string }).query).replace(/,.*$/, ")")))
      expect(exported, m).toContain(m)
  })

  it("shows what operators watch: capture lag and throughput, slot WAL, quarantine, deliveries and outcomes, circuits, answer times, API requests and errors, read replicas' lag", () => {
    const all = panels.flatMap((p) => (p.targets ?? []).flatMap((t) => metricsIn(t.expr)))
    for (const m of [
      "srs_capture_lag_seconds",
      "srs_capture_changes_total",
      "srs_capture_retained_wal_bytes",
      "srs_capture_quarantined",
      "srs_deliveries_total",
      "srs_webhook_circuits",
      "srs_delivery_attempt_duration_seconds_bucket",
      "srs_http_requests_total",
      "srs_read_replica_lag_seconds"
    ])
      expect(all, m).toContain(m)
  })

  it("is provisioned by the compose file, on the Prometheus it provisions", () => {
    const compose = readFileSync(join(ROOT, "docker-compose.yml"), "utf8")
    expect(compose).toContain("- ./deploy/grafana/provisioning:/etc/grafana/provisioning:ro")
    expect(compose).toContain("- ./deploy/grafana/dashboards:/var/lib/grafana/dashboards:ro")
    const provider = readFileSync(join(GRAFANA, "provisioning/dashboards/safety-records-service.yml"), "utf8")
    expect(provider).toContain("path: /var/lib/grafana/dashboards")
    expect(readdirSync(join(GRAFANA, "dashboards"))).toEqual(["safety-records-service.json"])
    const source = readFileSync(join(GRAFANA, "provisioning/datasources/prometheus.yml"), "utf8")
    expect(source).toContain("uid: prometheus")
    expect(source).toContain("url: http://prometheus:9090")
    expect(compose).toMatch(/\n {2}prometheus:\n/)
    // Every panel and query reads the data source variable, which picks the provisioned one.
    const variable = dashboard.templating.list.find((v) => v.name === "datasource")!
    expect(variable.current?.value).toBe("prometheus")
    // Grafana's own syntax for the variable, not a template string.
    const VARIABLE = ["$", "{datasource}"].join("")
    for (const p of panels) {
      expect(p.datasource?.uid, p.title).toBe(VARIABLE)
      for (const t of p.targets ?? []) expect(t.datasource?.uid ?? VARIABLE, p.title).toBe(VARIABLE)
    }
    expect(new Set(panels.map((p) => p.id)).size).toBe(panels.length)
    expect(existsSync(join(ROOT, "deploy/prometheus/grafana-dashboard.json"))).toBe(false)
  })
})
