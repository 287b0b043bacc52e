// Delivery health drawn as SVG on the server (docs/events.md#delivery-health): deliveries by
// outcome as stacked bars, answer times (p50, p95) as lines, for the last 24 hours and 7 days.
// No chart library: the pages allow no inline script, and a few rectangles need none. Each
// chart has a text summary for screen readers and its figures as a table under it. Pure.
import type { DeliveryHealth, HealthBucket, HealthSeries, Outcome } from "../../webhooks/deliveries/health.ts"
import { html, raw, type Html } from "./html.ts"

const W = 480
const H = 200
const LEFT = 58
const RIGHT = 8
const TOP = 10
const BOTTOM = 26
const PLOT_W = W - LEFT - RIGHT
const PLOT_H = H - TOP - BOTTOM

/** Bottom to top. */
const STACK: ReadonlyArray<Outcome> = ["succeeded", "retried", "failed", "waiting"]
export const OUTCOME_LABELS: Readonly<Record<Outcome, string>> = {
  succeeded: "Succeeded",
  retried: "Retried",
  failed: "Failed",
  waiting: "Waiting"
}

/** A round top for an axis: 1, 2 or 5 times a power of ten, at least `max`. */
export const niceMax = (max: number): number => {
  if (max <= 0) return 1
  const p = 10 ** Math.floor(Math.log10(max))
  for (const m of [1, 2, 5, 10]) if (m * p >= max) return m * p
  return 10 * p
}

const fmt = (n: number) => n.toLocaleString("en")
const ms = (n: number | null) => (n === null ? "–" : n >= 10_000 ? `${fmt(Math.round(n / 1000))} s` : `${fmt(n)} ms`)
const total = (b: HealthBucket) => STACK.reduce((s, o) => s + b.counts[o], 0)

/**
 * A round top for a count axis: 2, 4 or 10 times a power of ten (at least 2), so the half-way
 * line is a whole number too. Pure.
 */
export const niceCountMax = (max: number): number => {
  if (max <= 2) return 2
  const p = 10 ** Math.floor(Math.log10(max))
  for (const m of [1, 2, 4, 10]) if (m * p >= max) return m * p
  return 10 * p
}

type Span = "day" | "week"

/** "14:00" for an hour, "Mon 3" for a day (UTC, as every date of the pages). */
const labelOf = (start: string, span: Span): string => {
  const d = new Date(start)
  if (span === "day") return `${String(d.getUTCHours()).padStart(2, "0")}:00`
  return `${["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"][d.getUTCDay()]} ${d.getUTCDate()}`
}
const fullLabel = (start: string, span: Span): string =>
  span === "day" ? `${start.slice(0, 13).replace("T", " ")}:00 UTC` : `${start.slice(0, 10)} (UTC)`

/** The x axis's labels: every 6th hour, or every day. */
const xLabels = (buckets: ReadonlyArray<HealthBucket>, span: Span, step: number): Html =>
  html`${buckets.map((b, i) =>
    span === "week" || i % 6 === 0
      ? raw(
          `<text class="axis" x="${(LEFT + step * (i + 0.5)).toFixed(1)}" y="${H - 8}" text-anchor="middle">${labelOf(b.start, span)}</text>`
        )
      : ""
  )}`

const yAxis = (top: number, unit: (n: number) => string): Html =>
  raw(
    [0, 0.5, 1]
      .map((f) => {
        const y = (TOP + PLOT_H * (1 - f)).toFixed(1)
        return `<line class="grid" x1="${LEFT}" x2="${W - RIGHT}" y1="${y}" y2="${y}"/><text class="axis" x="${LEFT - 4}" y="${y}" dy="0.35em" text-anchor="end">${unit(top * f)}</text>`
      })
      .join("")
  )

/** Deliveries by outcome, one stacked bar a bucket. */
export const outcomesChart = (id: string, series: HealthSeries, span: Span): Html => {
  const buckets = series.buckets
  const top = niceCountMax(Math.max(0, ...buckets.map(total)))
  const step = PLOT_W / Math.max(1, buckets.length)
  const barW = Math.max(2, step * 0.7)
  const t = series.total
  const summary = `${fmt(total(t))} deliveries: ${STACK.map((o) => `${fmt(t.counts[o])} ${o}`).join(", ")}.`
  return html`<figure class="chart" id="${id}" data-chart="outcomes">
<figcaption><strong>Deliveries by outcome</strong> <span class="muted">${span === "day" ? "last 24 hours, by the hour" : "last 7 days, by the day"}</span></figcaption>
<ul class="legend" aria-hidden="true">${STACK.map(
    (o) =>
      html`<li><span class="swatch ${o}"></span>${OUTCOME_LABELS[o]} <strong data-total="${o}">${fmt(t.counts[o])}</strong></li>`
  )}</ul>
<svg viewBox="0 0 ${W} ${H}" role="img" aria-labelledby="${id}-title ${id}-desc" class="plot">
<title id="${id}-title">Deliveries by outcome, ${span === "day" ? "last 24 hours" : "last 7 days"}</title>
<desc id="${id}-desc">${summary}</desc>
${yAxis(top, (n) => fmt(Math.round(n)))}
${buckets.map((b, i) => {
  let y = TOP + PLOT_H
  const x = LEFT + step * i + (step - barW) / 2
  return html`<g>${STACK.map((o) => {
    const n = b.counts[o]
    if (n === 0) return ""
    const h = (n / top) * PLOT_H
    y -= h
    return html`<rect class="bar ${o}" x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${barW.toFixed(1)}" height="${Math.max(h, 0.5).toFixed(1)}" data-outcome="${o}" data-count="${n}"><title>${fullLabel(b.start, span)}: ${fmt(n)} ${o}</title></rect>`
  })}</g>`
})}
${xLabels(buckets, span, step)}
</svg>
</figure>`
}

/** Answer times: p50 and p95 of the attempts made in each bucket, as two lines (a gap where none was timed). */
export const timesChart = (id: string, series: HealthSeries, span: Span): Html => {
  const buckets = series.buckets
  const top = niceMax(Math.max(0, ...buckets.map((b) => b.p95 ?? 0)))
  const step = PLOT_W / Math.max(1, buckets.length)
  const line = (pick: (b: HealthBucket) => number | null, cls: string) => {
    const parts: Array<string> = []
    let run: Array<string> = []
    const flush = () => {
      if (run.length === 1) parts.push(`M${run[0]}h0.01`)
      else if (run.length > 1) parts.push(`M${run.join("L")}`)
      run = []
    }
    for (const [i, b] of buckets.entries()) {
      const v = pick(b)
      if (v === null) flush()
      else run.push(`${(LEFT + step * (i + 0.5)).toFixed(1)},${(TOP + PLOT_H * (1 - v / top)).toFixed(1)}`)
    }
    flush()
    return parts.length === 0 ? "" : `<path class="line ${cls}" d="${parts.join("")}"/>`
  }
  // A dot for each bucket's figures (a bucket alone between gaps shows as its dots), titled for a pointer's hover.
  const dots = buckets.map((b, i) => {
    if (b.p50 === null) return ""
    const cx = (LEFT + step * (i + 0.5)).toFixed(1)
    const cy = (v: number | null) => (TOP + PLOT_H * (1 - (v ?? 0) / top)).toFixed(1)
    return html`<g><title>${fullLabel(b.start, span)}: p50 ${ms(b.p50)}, p95 ${ms(b.p95)} (${fmt(b.attempts)} attempts)</title><circle class="dot p95" cx="${cx}" cy="${cy(b.p95)}" r="3"/><circle class="dot p50" cx="${cx}" cy="${cy(b.p50)}" r="3"/></g>`
  })
  const t = series.total
  return html`<figure class="chart" id="${id}" data-chart="times">
<figcaption><strong>Answer time</strong> <span class="muted">of every attempt, ${span === "day" ? "last 24 hours" : "last 7 days"}</span></figcaption>
<ul class="legend" aria-hidden="true"><li><span class="swatch p50"></span>p50 <strong data-total="p50">${ms(t.p50)}</strong></li><li><span class="swatch p95"></span>p95 <strong data-total="p95">${ms(t.p95)}</strong></li><li class="muted">${fmt(t.attempts)} attempts</li></ul>
<svg viewBox="0 0 ${W} ${H}" role="img" aria-labelledby="${id}-title ${id}-desc" class="plot">
<title id="${id}-title">Answer time, ${span === "day" ? "last 24 hours" : "last 7 days"}</title>
<desc id="${id}-desc">${t.attempts === 0 ? "No attempt was timed." : `Over ${fmt(t.attempts)} attempts: half answered within ${ms(t.p50)}, 95% within ${ms(t.p95)}.`}</desc>
${yAxis(top, (n) => ms(Math.round(n)))}
${raw(line((b) => b.p95, "p95"))}${raw(line((b) => b.p50, "p50"))}
${dots}
${xLabels(buckets, span, step)}
</svg>
</figure>`
}

/** The figures of a series as a table, for those who read rather than look. */
const figuresTable = (series: HealthSeries, span: Span): Html => html`<table class="figures">
<thead><tr><th scope="col">${span === "day" ? "Hour (UTC)" : "Day (UTC)"}</th>${STACK.map((o) => html`<th scope="col" class="num">${OUTCOME_LABELS[o]}</th>`)}<th scope="col" class="num">p50</th><th scope="col" class="num">p95</th></tr></thead>
<tbody>${[...series.buckets]
  .reverse()
  .map(
    (b) =>
      html`<tr><th scope="row">${fullLabel(b.start, span)}</th>${STACK.map((o) => html`<td class="num">${fmt(b.counts[o])}</td>`)}<td class="num">${ms(b.p50)}</td><td class="num">${ms(b.p95)}</td></tr>`
  )}</tbody>
<tfoot><tr><th scope="row">All</th>${STACK.map((o) => html`<td class="num">${fmt(series.total.counts[o])}</td>`)}<td class="num">${ms(series.total.p50)}</td><td class="num">${ms(series.total.p95)}</td></tr></tfoot>
</table>`

/** Both spans' charts, with their figures, under a heading; `id` keeps several on a page apart. */
export const healthCharts = (id: string, health: DeliveryHealth, heading: Interpolated = "Delivery health"): Html =>
  html`<section class="health" id="${id}" aria-labelledby="${id}-heading">
<h2 id="${id}-heading">${heading}</h2>
<p class="hint">Each delivery counted by its outcome now: succeeded at the first attempt, retried (it took more than one, or is waiting for its next), failed (every attempt failed), waiting (not attempted yet). Answer times are those of every attempt sent, to within 4%.</p>
<div class="charts">
${outcomesChart(`${id}-day`, health.day, "day")}
${timesChart(`${id}-day-times`, health.day, "day")}
${outcomesChart(`${id}-week`, health.week, "week")}
${timesChart(`${id}-week-times`, health.week, "week")}
</div>
<details><summary>The figures, by the hour</summary>${figuresTable(health.day, "day")}</details>
<details><summary>The figures, by the day</summary>${figuresTable(health.week, "week")}</details>
</section>`

type Interpolated = string | Html

/** The charts' styles, part of the pages' one stylesheet (src/faces/pages/assets.ts). */
export const CHART_STYLES = `.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 26rem), 1fr)); gap: 1rem; }
figure.chart { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: .75rem; }
figure.chart figcaption { margin-bottom: .25rem; }
svg.plot { width: 100%; height: auto; display: block; }
svg.plot .axis { font-size: 12px; fill: var(--muted); }
svg.plot .grid { stroke: var(--line); stroke-width: 1; }
svg.plot .bar.succeeded, .swatch.succeeded { fill: #1f7a3f; background: #1f7a3f; }
svg.plot .bar.retried, .swatch.retried { fill: #c27c0e; background: #c27c0e; }
svg.plot .bar.failed, .swatch.failed { fill: #b3261e; background: #b3261e; }
svg.plot .bar.waiting, .swatch.waiting { fill: #8a94a0; background: #8a94a0; }
svg.plot .line { fill: none; stroke-width: 2.5; vector-effect: non-scaling-stroke; stroke-linejoin: round; stroke-linecap: round; }
svg.plot .line.p50, .swatch.p50 { stroke: #0b4f8a; background: #0b4f8a; }
svg.plot .line.p95, .swatch.p95 { stroke: #c75b00; background: #c75b00; }
svg.plot .dot.p50 { fill: #0b4f8a; }
svg.plot .dot.p95 { fill: #c75b00; }
ul.legend { display: flex; flex-wrap: wrap; gap: .25rem 1rem; list-style: none; margin: 0 0 .25rem; padding: 0; font-size: .92rem; }
.swatch { display: inline-block; width: .8rem; height: .8rem; border-radius: 2px; margin-right: .3rem; vertical-align: -.05rem; }
table.figures { font-size: .9rem; }
details { margin: .5rem 0; }
main h1 { overflow-wrap: anywhere; }
svg.brand-bar { display: block; width: 100%; height: 6px; }
details.portal-link { margin: 0 0 .5rem; }
details.portal-link form { margin: .5rem 0; }
ol.attempts { margin: .25rem 0 0; padding-left: 1.25rem; font-size: .9rem; }
summary { cursor: pointer; padding: .25rem 0; }
`
