// The metrics registry: prom-client's, one per process (tests make their own), with the
// standard process and Node.js metrics (CPU, memory, file descriptors, event-loop lag, heap,
// GC) and the service's families. Values held by other parts of the service (capture's and
// the delivery engine's counters, figures read from the database) are not copied in on every
// change: collectors set them just before a scrape, each bounded in time, and one that fails
// leaves its figures as they were (stale beats none: the scrape still answers).
import client from "prom-client"

export type Labels = Readonly<Record<string, string>>

export type Counter = client.Counter<string>
export type Gauge = client.Gauge<string>
export type Histogram = client.Histogram<string>

export type Collector = () => void | Promise<void>

/** A collector that has not answered by then is left behind for this scrape. */
export const COLLECT_TIMEOUT_MS = 5_000

/** The content type of the text format prom-client writes (0.0.4). */
export const PROMETHEUS_CONTENT_TYPE: string = client.Registry.PROMETHEUS_CONTENT_TYPE

// A series without labels is absent until it is first set (prom-client starts it at 0): a
// process without capture shows no capture lag rather than a lag of 0.
const absentUntilSet = <M extends { remove: (...values: string[]) => void }>(
  metric: M,
  labelNames: ReadonlyArray<string>
): M => {
  if (labelNames.length === 0) metric.remove()
  return metric
}

export class Registry {
  readonly prom = new client.Registry()
  private readonly collectors = new Set<Collector>()
  private readonly collectTimeoutMs: number

  constructor(options: { readonly collectTimeoutMs?: number } = {}) {
    this.collectTimeoutMs = options.collectTimeoutMs ?? COLLECT_TIMEOUT_MS
    client.collectDefaultMetrics({ register: this.prom })
  }

  counter(name: string, help: string, labelNames: ReadonlyArray<string> = []): Counter {
    return absentUntilSet(new client.Counter({ name, help, labelNames, registers: [this.prom] }), labelNames)
  }

  gauge(name: string, help: string, labelNames: ReadonlyArray<string> = []): Gauge {
    return absentUntilSet(new client.Gauge({ name, help, labelNames, registers: [this.prom] }), labelNames)
  }

  histogram(name: string, help: string, labelNames: ReadonlyArray<string>, buckets: ReadonlyArray<number>): Histogram {
    return new client.Histogram({ name, help, labelNames, buckets: [...buckets], registers: [this.prom] })
  }

  /** Runs before each scrape; returns a function that removes it. */
  collect(collector: Collector): () => void {
    this.collectors.add(collector)
    return () => void this.collectors.delete(collector)
  }

  /** Runs the collectors (each bounded by COLLECT_TIMEOUT_MS), then renders every family. */
  async scrape(): Promise<string> {
    await Promise.all(
      [...this.collectors].map((c) => {
        let timer: ReturnType<typeof setTimeout> | undefined
        const bounded = new Promise<void>((resolve) => (timer = setTimeout(resolve, this.collectTimeoutMs)))
        const ran = (async () => c())().catch(() => {
          // The database is down, say: the scrape answers with what it had.
        })
        return Promise.race([ran, bounded]).finally(() => clearTimeout(timer))
      })
    )
    return this.prom.metrics()
  }

  /** Every family now, without running the collectors. */
  render(): Promise<string> {
    return this.prom.metrics()
  }
}

/** Sets a counter to a value counted elsewhere (capture's and the engine's own counters): prom-client's only go up. */
export const mirror = (counter: Counter, labels: Labels | undefined, value: number): void => {
  if (labels === undefined) {
    counter.reset()
    counter.inc(value)
  } else {
    counter.remove(labels)
    counter.inc(labels, value)
  }
}

/** Sets a gauge, or removes its series when the value is unknown (so it is absent, not 0). */
export const setOrClear = (gauge: Gauge, value: number | null, labels?: Labels): void => {
  if (value === null) {
    if (labels === undefined) gauge.remove()
    else gauge.remove(labels)
  } else if (labels === undefined) gauge.set(value)
  else gauge.set(labels, value)
}

/** One series' value now, or undefined when absent (tests, and anyone reading a figure in process). */
export const seriesValue = async (metric: Counter | Gauge, labels: Labels = {}): Promise<number | undefined> => {
  const { values } = await metric.get()
  const wanted = Object.entries(labels)
  const found = values.find((v) => {
    const have = v.labels as Record<string, string | number | undefined>
    return Object.keys(have).length === wanted.length && wanted.every(([k, x]) => String(have[k]) === x)
  })
  return found?.value
}
