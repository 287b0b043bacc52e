// A small metrics registry: counters, gauges and histograms with labels, rendered in the
// Prometheus text exposition format 0.0.4. Values held by other parts of the service
// (capture's and the delivery engine's counters, lag read from the database) are not
// copied in on every change: collectors set them just before a scrape.

export type Labels = Readonly<Record<string, string>>

type Kind = "counter" | "gauge" | "histogram"

interface Family {
  readonly name: string
  readonly help: string
  readonly kind: Kind
  readonly labelNames: ReadonlyArray<string>
  /** Its sample lines, rendered now. */
  readonly render: () => ReadonlyArray<string>
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/

/** Label values escaped as the text format requires (backslash, double quote, newline). */
const escapeValue = (v: string) => v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")
const escapeHelp = (v: string) => v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")

/** 0.0.4 number syntax: integers plainly, special values as Prometheus spells them. */
export const formatValue = (n: number): string =>
  Number.isNaN(n) ? "NaN" : n === Infinity ? "+Inf" : n === -Infinity ? "-Inf" : String(n)

const labelText = (names: ReadonlyArray<string>, values: ReadonlyArray<string>, extra?: [string, string]) => {
  const parts = names.map((n, i) => `${n}="${escapeValue(values[i]!)}"`)
  if (extra) parts.push(`${extra[0]}="${escapeValue(extra[1])}"`)
  return parts.length === 0 ? "" : `{${parts.join(",")}}`
}

/** Series are kept by their label values joined with a separator no value can hold unescaped. */
const seriesKey = (values: ReadonlyArray<string>) => values.join("\u0000")

abstract class Metric {
  readonly name: string
  readonly help: string
  readonly labelNames: ReadonlyArray<string>

  constructor(name: string, help: string, labelNames: ReadonlyArray<string>) {
    if (!NAME.test(name)) throw new Error(`invalid metric name ${name}`)
    for (const l of labelNames) if (!LABEL.test(l) || l.startsWith("__")) throw new Error(`invalid label name ${l} on ${name}`)
    this.name = name
    this.help = help
    this.labelNames = labelNames
  }

  protected values(labels: Labels | undefined): string[] {
    const given = labels ?? {}
    for (const k of Object.keys(given)) if (!this.labelNames.includes(k)) throw new Error(`${this.name} has no label ${k}`)
    return this.labelNames.map((n) => {
      const v = given[n]
      if (v === undefined) throw new Error(`${this.name} needs label ${n}`)
      return v
    })
  }
}

/** Only goes up (or is set from a source that only goes up). */
export class Counter extends Metric {
  private readonly series = new Map<string, { values: string[]; value: number }>()

  inc(labels?: Labels, by = 1): void {
    if (by < 0) throw new Error(`${this.name}: a counter cannot go down`)
    const values = this.values(labels)
    const key = seriesKey(values)
    const s = this.series.get(key)
    if (s) s.value += by
    else this.series.set(key, { values, value: by })
  }

  /** For collectors mirroring a counter kept elsewhere (e.g. CaptureStats). */
  set(labels: Labels | undefined, value: number): void {
    const values = this.values(labels)
    const key = seriesKey(values)
    const s = this.series.get(key)
    if (s) s.value = value
    else this.series.set(key, { values, value })
  }

  /** One series, resolved once: for a hot path that counts the same labels again and again. */
  labelled(labels?: Labels): { readonly inc: () => void } {
    const values = this.values(labels)
    const key = seriesKey(values)
    return {
      inc: () => {
        const s = this.series.get(key)
        if (s) s.value++
        else this.series.set(key, { values, value: 1 })
      }
    }
  }

  get(labels?: Labels): number {
    return this.series.get(seriesKey(this.values(labels)))?.value ?? 0
  }

  render(): string[] {
    return [...this.series.values()].map((s) => `${this.name}${labelText(this.labelNames, s.values)} ${formatValue(s.value)}`)
  }
}

export class Gauge extends Metric {
  private readonly series = new Map<string, { values: string[]; value: number }>()

  set(labels: Labels | undefined, value: number): void {
    const values = this.values(labels)
    this.series.set(seriesKey(values), { values, value })
  }

  get(labels?: Labels): number | undefined {
    return this.series.get(seriesKey(this.values(labels)))?.value
  }

  render(): string[] {
    return [...this.series.values()].map((s) => `${this.name}${labelText(this.labelNames, s.values)} ${formatValue(s.value)}`)
  }
}

export class Histogram extends Metric {
  readonly buckets: ReadonlyArray<number>
  private readonly series = new Map<string, { values: string[]; counts: number[]; sum: number; count: number }>()

  constructor(name: string, help: string, labelNames: ReadonlyArray<string>, buckets: ReadonlyArray<number>) {
    super(name, help, labelNames)
    if (labelNames.includes("le")) throw new Error(`${name}: le is reserved`)
    const sorted = [...buckets].sort((a, b) => a - b)
    if (sorted.length === 0 || sorted.some((b, i) => i > 0 && b === sorted[i - 1])) throw new Error(`${name}: buckets must be distinct`)
    this.buckets = sorted
  }

  observe(labels: Labels | undefined, value: number): void {
    const values = this.values(labels)
    this.record(seriesKey(values), values, value)
  }

  /** One series, resolved once: for a hot path that observes the same labels again and again. */
  labelled(labels?: Labels): { readonly observe: (value: number) => void } {
    const values = this.values(labels)
    const key = seriesKey(values)
    return { observe: (value) => this.record(key, values, value) }
  }

  private record(key: string, values: string[], value: number): void {
    let s = this.series.get(key)
    if (!s) this.series.set(key, (s = { values, counts: this.buckets.map(() => 0), sum: 0, count: 0 }))
    // Buckets are stored non-cumulative; rendering accumulates them.
    let i = 0
    while (i < this.buckets.length && value > this.buckets[i]!) i++
    if (i < this.buckets.length) s.counts[i]!++
    s.sum += value
    s.count++
  }

  /** Observations so far in the series (for tests and status). */
  count(labels?: Labels): number {
    return this.series.get(seriesKey(this.values(labels)))?.count ?? 0
  }

  render(): string[] {
    const lines: string[] = []
    for (const s of this.series.values()) {
      let cumulative = 0
      this.buckets.forEach((b, i) => {
        cumulative += s.counts[i]!
        lines.push(`${this.name}_bucket${labelText(this.labelNames, s.values, ["le", formatValue(b)])} ${cumulative}`)
      })
      lines.push(`${this.name}_bucket${labelText(this.labelNames, s.values, ["le", "+Inf"])} ${s.count}`)
      lines.push(`${this.name}_sum${labelText(this.labelNames, s.values)} ${formatValue(s.sum)}`)
      lines.push(`${this.name}_count${labelText(this.labelNames, s.values)} ${s.count}`)
    }
    return lines
  }
}

export type Collector = () => void | Promise<void>

export class Registry {
  private readonly families = new Map<string, Family>()
  private readonly collectors = new Set<Collector>()

  private add<M extends Metric & { render(): string[] }>(kind: Kind, metric: M): M {
    const existing = this.families.get(metric.name)
    if (existing) throw new Error(`metric ${metric.name} is already registered`)
    this.families.set(metric.name, { name: metric.name, help: metric.help, kind, labelNames: metric.labelNames, render: () => metric.render() })
    return metric
  }

  counter(name: string, help: string, labelNames: ReadonlyArray<string> = []): Counter {
    return this.add("counter", new Counter(name, help, labelNames))
  }

  gauge(name: string, help: string, labelNames: ReadonlyArray<string> = []): Gauge {
    return this.add("gauge", new Gauge(name, help, labelNames))
  }

  histogram(name: string, help: string, labelNames: ReadonlyArray<string>, buckets: ReadonlyArray<number>): Histogram {
    return this.add("histogram", new Histogram(name, help, labelNames, buckets))
  }

  /** Runs before each scrape; returns a function that removes it. */
  collect(collector: Collector): () => void {
    this.collectors.add(collector)
    return () => void this.collectors.delete(collector)
  }

  /** Runs the collectors, then renders every family. A failing collector leaves its metrics as they were. */
  async scrape(): Promise<string> {
    await Promise.all([...this.collectors].map(async (c) => {
      try {
        await c()
      } catch {
        // A scrape must still answer (e.g. the database is down); stale values beat none.
      }
    }))
    return this.render()
  }

  render(): string {
    const out: string[] = []
    for (const f of this.families.values()) {
      out.push(`# HELP ${f.name} ${escapeHelp(f.help)}`)
      out.push(`# TYPE ${f.name} ${f.kind}`)
      out.push(...f.render())
    }
    return out.join("\n") + "\n"
  }
}

/** The content type of format 0.0.4. */
export const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
