// The status page: whether capture keeps up (its lag behind the app's database, when it last
// applied a change) and how many records it holds in quarantine, as the operators' status
// reads them (src/faces/ops/status.ts), so an admin sees why records are late without asking.
import { Effect } from "effect"
import { HttpRouter } from "effect/http"
import { captureStatus, type CaptureStatus } from "../../pipeline/capture/status.ts"
import {
  companyHeldCount,
  quarantineSummary,
  type QuarantineSummary
} from "../../pipeline/capture/quarantine/operators.ts"
import { CaptureConfig } from "../../platform/config.ts"
import { LAG_THRESHOLD_SECONDS } from "../ops/status.ts"
import { html, type Html } from "./html.ts"
import { htmlResponse, page, when } from "./layout.ts"
import { PATHS } from "./paths.ts"
import { signedIn } from "./request.ts"

/** "4 s", "3 min 20 s", "2 h 5 min". Pure. */
export const formatSeconds = (s: number): string => {
  const t = Math.round(s)
  if (t < 60) return `${t} s`
  if (t < 3600) return `${Math.floor(t / 60)} min${t % 60 === 0 ? "" : ` ${t % 60} s`}`
  return `${Math.floor(t / 3600)} h${Math.floor((t % 3600) / 60) === 0 ? "" : ` ${Math.floor((t % 3600) / 60)} min`}`
}

const captureFacts = (c: CaptureStatus | null): Html => {
  if (c === null) return html`<p class="flash error" role="alert">Capture's state could not be read.</p>`
  const behind = c.lagSeconds !== null && c.lagSeconds > LAG_THRESHOLD_SECONDS
  return html`<dl class="facts" id="capture">
  <dt>Lag</dt><dd id="capture-lag" data-seconds="${c.lagSeconds ?? ""}">${
    c.lagSeconds === null
      ? html`<span class="muted">not known (capture has not started)</span>`
      : c.lagSeconds === 0
        ? html`<span class="state on">Up to date</span>`
        : html`<span class="state ${behind ? "failing" : "on"}">${formatSeconds(c.lagSeconds)} behind</span>${c.lagBytes === null ? "" : html` <span class="muted">(${c.lagBytes.toLocaleString("en")} bytes of WAL)</span>`}`
  }</dd>
  <dt>Last change applied</dt><dd>${when(c.appliedAt)}</dd>
  <dt>Last app commit seen</dt><dd>${when(c.lastCommitAt)}</dd>
  ${c.stalledAt === null ? "" : html`<dt>Stalled</dt><dd><span class="state failing">since ${when(c.stalledAt)}</span> <span class="muted">${c.stallReason ?? ""}</span></dd>`}
  ${c.slotExists ? "" : html`<dt>Replication slot</dt><dd><span class="state off">missing</span></dd>`}
</dl>
${behind ? html`<p class="flash warn" role="status">Records and events reach the API and webhooks this late. Operators are alerted past ${LAG_THRESHOLD_SECONDS} s (docs: operations).</p>` : ""}`
}

const quarantineFacts = (q: QuarantineSummary | null, own: number | null): Html =>
  q === null
    ? html`<p class="flash error" role="alert">The quarantine could not be read.</p>`
    : html`<dl class="facts" id="quarantine">
  <dt>Records held</dt><dd id="quarantine-count" data-count="${q.count}">${q.count === 0 ? html`<span class="state on">None</span>` : html`<span class="state failing">${q.count.toLocaleString("en")}</span>`}${own === null || q.count === 0 ? "" : html` <span class="muted">(${own.toLocaleString("en")} of your company's)</span>`}</dd>
  <dt>App tables out of shape</dt><dd>${q.broken.length === 0 ? html`<span class="muted">none</span>` : q.broken.map((b) => html`<code>app.${b.table}</code> <span class="muted">since ${when(b.since)}</span> `)}</dd>
</dl>
<p class="hint">A held record could not be turned into its API record: its view and its events wait, while every other record flows. Operators release them (npm run admin -- capture quarantine list).</p>`

export const StatusRoutes = HttpRouter.add(
  "GET",
  PATHS.status,
  signedIn((session) =>
    Effect.gen(function* () {
      const { slot } = yield* Effect.orDie(CaptureConfig)
      const capture = yield* captureStatus(slot).pipe(
        Effect.map((c): CaptureStatus | null => c),
        Effect.catchDefect(() => Effect.succeed(null))
      )
      const quarantine = yield* quarantineSummary().pipe(
        Effect.map((q): QuarantineSummary | null => q),
        Effect.catchDefect(() => Effect.succeed(null))
      )
      const own = yield* companyHeldCount(session.actor.companyId)
      return htmlResponse(
        page({
          title: "Status",
          section: "status",
          session,
          content: html`<section aria-labelledby="capture-title"><h2 id="capture-title">Capture</h2>
<p class="hint">How far the records the API serves and the events webhooks send are behind the app's database.</p>
${captureFacts(capture)}</section>
<section aria-labelledby="quarantine-title"><h2 id="quarantine-title">Quarantine</h2>
${quarantineFacts(quarantine, own)}</section>`
        })
      )
    })
  )
)
