// The registry's text exposition (format 0.0.4), label handling and histogram buckets.
import { describe, expect, it } from "vitest"
import { Registry } from "../../src/observability/registry.ts"
import { routeMatcher, requestIdOf } from "../../src/observability/requests.ts"
import { progressBar, renderBar } from "../../src/operations/progress.ts"

describe("registry", () => {
  it("renders counters and gauges with HELP, TYPE and escaped labels", () => {
    const r = new Registry()
    const c = r.counter("srs_things_total", "Things\ncounted", ["kind"])
    const g = r.gauge("srs_level", "A level")
    c.inc({ kind: 'a "quoted" \\ value\nnext' })
    c.inc({ kind: "b" }, 2)
    c.inc({ kind: "b" })
    g.set(undefined, 1.5)
    expect(r.render()).toBe(
      [
        "# HELP srs_things_total Things\\ncounted",
        "# TYPE srs_things_total counter",
        'srs_things_total{kind="a \\"quoted\\" \\\\ value\\nnext"} 1',
        'srs_things_total{kind="b"} 3',
        "# HELP srs_level A level",
        "# TYPE srs_level gauge",
        "srs_level 1.5",
        ""
      ].join("\n")
    )
    expect(c.get({ kind: "b" })).toBe(3)
  })

  it("renders histograms with cumulative buckets, +Inf, sum and count", () => {
    const r = new Registry()
    const h = r.histogram("srs_seconds", "Durations", ["result"], [0.1, 1, 0.5])
    for (const v of [0.0625, 0.5, 0.25, 2, 0.75]) h.observe({ result: "ok" }, v)
    expect(r.render().split("\n")).toEqual([
      "# HELP srs_seconds Durations",
      "# TYPE srs_seconds histogram",
      'srs_seconds_bucket{result="ok",le="0.1"} 1',
      'srs_seconds_bucket{result="ok",le="0.5"} 3',
      'srs_seconds_bucket{result="ok",le="1"} 4',
      'srs_seconds_bucket{result="ok",le="+Inf"} 5',
      'srs_seconds_sum{result="ok"} 3.5625',
      'srs_seconds_count{result="ok"} 5',
      ""
    ])
    expect(h.count({ result: "ok" })).toBe(5)
  })

  it("refuses bad names, missing or unknown labels, negative increments and duplicates", () => {
    const r = new Registry()
    expect(() => r.counter("bad-name", "x")).toThrow("invalid metric name")
    const c = r.counter("srs_ok_total", "x", ["a"])
    expect(() => c.inc()).toThrow("needs label a")
    expect(() => c.inc({ a: "1", b: "2" })).toThrow("has no label b")
    expect(() => c.inc({ a: "1" }, -1)).toThrow("cannot go down")
    expect(() => r.counter("srs_ok_total", "again")).toThrow("already registered")
    expect(() => r.histogram("srs_h", "x", ["le"], [1])).toThrow("le is reserved")
  })

  it("a labelled series counts into the same series as the labels do, also after a collector sets it", () => {
    const r = new Registry()
    const c = r.counter("srs_hits_total", "Hits", ["route"])
    const h = r.histogram("srs_seconds", "Seconds", ["route"], [0.1, 1])
    const hits = c.labelled({ route: "/a" })
    hits.inc()
    c.inc({ route: "/a" })
    hits.inc()
    expect(c.get({ route: "/a" })).toBe(3)
    c.set({ route: "/a" }, 10)
    hits.inc()
    expect(c.get({ route: "/a" })).toBe(11)
    const seconds = h.labelled({ route: "/a" })
    seconds.observe(0.05)
    h.observe({ route: "/a" }, 0.5)
    seconds.observe(5)
    expect(h.count({ route: "/a" })).toBe(3)
    expect(r.render()).toContain('srs_seconds_bucket{route="/a",le="0.1"} 1\nsrs_seconds_bucket{route="/a",le="1"} 2\nsrs_seconds_bucket{route="/a",le="+Inf"} 3')
    expect(() => c.labelled({ path: "/a" })).toThrow()
  })

  it("runs collectors before a scrape; a failing collector does not stop it", async () => {
    const r = new Registry()
    const g = r.gauge("srs_collected", "x")
    let n = 0
    r.collect(() => g.set(undefined, ++n))
    r.collect(async () => {
      throw new Error("database down")
    })
    expect(await r.scrape()).toContain("srs_collected 1")
    expect(await r.scrape()).toContain("srs_collected 2")
  })
})

describe("request labels", () => {
  const route = routeMatcher([
    { method: "GET", path: "/api/v1/incidents" },
    { method: "GET", path: "/api/v1/incidents/:id" },
    { method: "GET", path: "/api/v1/hooks/:id" },
    { method: "POST", path: "/api/v1/hooks" },
    { method: "GET", path: "/metrics" }
  ])

  it("labels a request by its route pattern, never by ids or unknown paths", () => {
    expect(route("GET", "/api/v1/incidents?limit=5")).toBe("/api/v1/incidents")
    expect(route("GET", "/api/v1/incidents/7b0c2f59-1a60-4a0e-9d6c-3b1f3c1f2b10")).toBe("/api/v1/incidents/:id")
    expect(route("HEAD", "/metrics")).toBe("/metrics")
    expect(route("DELETE", "/api/v1/incidents")).toBe("/api/v1/incidents")
    expect(route("GET", "/api/v1/secret-path-mk_abc")).toBe("unmatched")
    expect(route("GET", "/wp-login.php")).toBe("unmatched")
  })

  it("walks the path, not every route: literal patterns first, one trailing slash, non-empty parameters", () => {
    const r = routeMatcher([
      { method: "GET", path: "/api/v1/:resource" },
      { method: "GET", path: "/api/v1/hooks" },
      { method: "GET", path: "/api/v1/:resource/:id" },
      { method: "POST", path: "/api/v1/hooks" },
      { method: "DELETE", path: "/api/v1/hooks/:id" }
    ])
    expect(r("GET", "/api/v1/hooks")).toBe("/api/v1/hooks")
    expect(r("GET", "/api/v1/incidents")).toBe("/api/v1/:resource")
    expect(r("GET", "/api/v1/incidents/")).toBe("/api/v1/:resource")
    expect(r("GET", "/api/v1/hooks/abc#x")).toBe("/api/v1/:resource/:id")
    expect(r("DELETE", "/api/v1/hooks/abc")).toBe("/api/v1/hooks/:id")
    expect(r("POST", "/api/v1/hooks?x=1")).toBe("/api/v1/hooks")
    expect(r("PUT", "/api/v1/hooks")).toBe("/api/v1/:resource")
    expect(r("GET", "/api/v1//abc")).toBe("unmatched")
    expect(r("GET", "/api/v1/a/b/c")).toBe("unmatched")
    expect(r("GET", "api/v1/hooks")).toBe("unmatched")
    expect(r("GET", "/")).toBe("unmatched")
  })

  it("keeps a caller's plain request id and replaces anything else", () => {
    expect(requestIdOf("abc-123_DEF.45678")).toBe("abc-123_DEF.45678")
    expect(requestIdOf('x"\n{"level":"error"}')).toMatch(/^[0-9a-f-]{36}$/)
    expect(requestIdOf(undefined)).toMatch(/^[0-9a-f-]{36}$/)
  })

  it("draws a progress bar on a terminal only, and clears it at the end", () => {
    const written: string[] = []
    const tty = { isTTY: true, write: (s: string) => written.push(s) } as unknown as NodeJS.WriteStream
    const bar = progressBar("replaying", tty)
    bar.update(0, 10)
    bar.update(10, 10)
    bar.done()
    expect(written).toEqual(["\r\x1b[2K" + renderBar("replaying", 0, 10), "\r\x1b[2K" + renderBar("replaying", 10, 10), "\r\x1b[2K"])
    const pipe = { isTTY: false, write: (s: string) => written.push(s) } as unknown as NodeJS.WriteStream
    const quiet = progressBar("replaying", pipe)
    quiet.update(1, 2)
    quiet.done()
    expect(written).toHaveLength(3)
  })

  it("draws a progress bar", () => {
    expect(renderBar("replaying", 25, 100)).toBe("replaying [########----------------------]  25% 25/100")
    expect(renderBar("x", 0, 0)).toBe("x [------------------------------]   0% 0/0")
  })
})
