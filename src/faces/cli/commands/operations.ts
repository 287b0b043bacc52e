// The operator's admin commands: replay, rebuild-views, status. Registered in
// src/faces/cli/commands/index.ts; they share its flags and output conventions (stdout is
// the answer, one JSON value with --json; progress goes to stderr on a terminal).
import { Cause, Effect, Exit, Option } from "effect"
import { Command, Flag } from "effect/cli"
import { parseFilterDate, FILTER_DATE_FORMATS } from "../../../domain/dates.ts"
import { at, invalid, isDomainError, words } from "../../../domain/errors.ts"
import { companyById, findAdmin, requireSomeAdmin } from "../../../access/identity.ts"
import {
  asOptional,
  commaList,
  databaseCommand,
  ExitWith,
  json,
  optionalText,
  output,
  table,
  when,
  withDatabase
} from "../support.ts"
import type { LeaderInfo } from "../../../pipeline/capture/leader.ts"
import { CaptureConfig, loadReadReplicas } from "../../../platform/config.ts"
import { isStartRefused } from "../../../platform/db/refusal.ts"
import { writeLog } from "../../../platform/logging.ts"
import { type Actor, SYSTEM } from "../../../access/activity.ts"
import { progressBar } from "../progress.ts"
import { rebuildViews } from "../../../pipeline/capture/rebuild.ts"
import { freshSnapshot, type FreshSnapshotResult } from "../../../pipeline/capture/fresh.ts"
import { destinationCompany } from "../../../webhooks/replay/queries.ts"
import { replay, type ReplaySummary } from "../../../webhooks/replay/select.ts"
import {
  assessStatus,
  databaseDown,
  HEALTH_EXIT_CODES,
  KEY_EXPIRY_WARNING_DAYS,
  LAG_THRESHOLD_SECONDS,
  operationsStatus,
  type HealthVerdict,
  type OperationsStatus
} from "../../ops/status.ts"

const dateFlag = (name: string, description: string) =>
  Flag.String(name).pipe(Flag.withDescription(`${description}: ${FILTER_DATE_FORMATS}`), Flag.optional)

const parseDate = (flag: string, value: Option.Option<string>) => {
  if (Option.isNone(value)) return Effect.succeed(undefined)
  const d = parseFilterDate(value.value)
  return d === undefined
    ? Effect.fail(invalid(words`${at(flag)} must be ${FILTER_DATE_FORMATS}, not "${value.value}"`))
    : Effect.succeed(new Date(d.epochMillis))
}

const replaySummaryText = (s: ReplaySummary) =>
  [
    s.dryRun
      ? `Dry run: would replay to ${s.destination.kind} ${s.destination.id} (${s.destination.url})`
      : s.replayId !== null
        ? `Replay ${s.replayId} queued to ${s.destination.kind} ${s.destination.id} (${s.destination.url})`
        : `Nothing to replay to ${s.destination.kind} ${s.destination.id} (${s.destination.url})`,
    `  events:    ${s.events.join(", ")}`,
    `  range:     ${when(s.since)} to ${when(s.until)}${s.failedOnly ? ", only those never delivered successfully" : ""}`,
    `  matched:   ${s.matched}`,
    `  ${s.dryRun ? "to resend:" : "resent:   "} ${s.resent} with their original delivery ids`,
    `  ${s.dryRun ? "to create:" : "new:      "} ${s.created} new deliveries (events this ${s.destination.kind} never had)`,
    ...(s.failedOnly ? [`  skipped:   ${s.skippedDelivered} already delivered`] : []),
    ...(s.skippedInFlight > 0 ? [`  in flight: ${s.skippedInFlight} being attempted right now (left alone)`] : []),
    ...(s.replayId !== null
      ? [
          `  the service sends them at REPLAY_RATE per destination, behind live deliveries; follow it with \`status\` or the admin pages`
        ]
      : []),
    ...(s.destination.on
      ? []
      : [
          `  note: the ${s.destination.kind} is ${s.destination.kind === "endpoint" ? "switched off" : "turned off"}; the replay waits until it is turned on`
        ])
  ].join("\n")

export const replayCommand = databaseCommand(
  "replay",
  {
    endpoint: optionalText("endpoint", "The endpoint's id"),
    subscription: optionalText("subscription", "The API subscription's id"),
    since: dateFlag("since", "Events from this moment on (default: when the destination was made)"),
    until: dateFlag("until", "Events before this moment (default: now)"),
    event: optionalText("event", "Only these events, separated by commas (default: all the destination takes)"),
    failed: Flag.Boolean("failed").pipe(
      Flag.withDescription("Only events never delivered successfully to this destination"),
      Flag.withDefault(false)
    ),
    dryRun: Flag.Boolean("dry-run").pipe(
      Flag.withDescription("Count what would be sent; send nothing"),
      Flag.withDefault(false)
    ),
    as: asOptional,
    json
  },
  (args) =>
    Effect.gen(function* () {
      const since = yield* parseDate("since", args.since)
      const until = yield* parseDate("until", args.until)
      const events = Option.isSome(args.event) ? commaList(args.event.value) : undefined
      const bar = progressBar("replaying")
      // An operator's action, told in the log's own shape on stderr (stdout is the answer):
      // one line once the replay is made (the service that sends it logs `replay finished`),
      // or once a dry run has counted; each greppable by its message.
      const t0 = Date.now()
      const asked = {
        endpointId: Option.getOrNull(args.endpoint),
        subscriptionId: Option.getOrNull(args.subscription),
        since: since?.toISOString() ?? null,
        until: until?.toISOString() ?? null,
        events: events ?? null,
        failedOnly: args.failed,
        dryRun: args.dryRun,
        as: Option.getOrNull(args.as)
      }
      const summary = yield* Effect.gen(function* () {
        let actor: Actor = SYSTEM
        if (Option.isSome(args.as)) {
          // --as must be an admin of the company the destination belongs to.
          const owner = yield* destinationCompany(
            Option.getOrElse(
              Option.orElse(args.endpoint, () => args.subscription),
              () => ""
            )
          )
          const admin = yield* findAdmin(args.as.value, owner ? yield* companyById(owner) : undefined)
          actor = { kind: "user", id: admin.userId, email: admin.email }
        }
        return yield* replay(
          {
            endpointId: Option.getOrUndefined(args.endpoint),
            subscriptionId: Option.getOrUndefined(args.subscription),
            since,
            until,
            events,
            failedOnly: args.failed,
            dryRun: args.dryRun,
            actor
          },
          (p) => bar.update(p.done, p.total, "queueing")
        ).pipe(Effect.ensuring(Effect.sync(bar.done)))
      }).pipe(
        Effect.tapCause((cause) =>
          Effect.sync(() => writeLog("warn", "replay failed", { ...asked, error: Cause.squash(cause) }, process.stderr))
        )
      )
      writeLog(
        "info",
        summary.dryRun ? "replay dry run" : summary.replayId !== null ? "replay started" : "replay: nothing to send",
        {
          replayId: summary.replayId,
          destination: { kind: summary.destination.kind, id: summary.destination.id },
          since: summary.since,
          until: summary.until,
          events: summary.events,
          failedOnly: summary.failedOnly,
          dryRun: summary.dryRun,
          matched: summary.matched,
          resent: summary.resent,
          created: summary.created,
          skippedDelivered: summary.skippedDelivered,
          skippedInFlight: summary.skippedInFlight,
          source: "cli",
          as: asked.as,
          ms: Date.now() - t0
        },
        process.stderr
      )
      yield* output(args.json, summary, () => replaySummaryText(summary))
    })
).pipe(
  Command.withDescription(
    "Send a destination's events again after an outage, as a replay the service sends at REPLAY_RATE per destination behind live deliveries (follow it with status, cancel it from the admin API or pages). An event keeps its delivery id when this destination had one (receivers drop repeats); events it never got get new deliveries."
  ),
  Command.withExamples([
    { command: "replay --endpoint 6f1c... --failed", description: "Everything the endpoint missed since it was made" },
    {
      command:
        "replay --endpoint 6f1c... --since 2026-03-01 --until 2026-03-04 --event incident.created --dry-run --json",
      description: "Count first"
    }
  ])
)

/** rebuild-views --fresh-snapshot: from the app's tables through a new slot, capture stopped. */
const freshSnapshotText = (r: FreshSnapshotResult) =>
  [
    `Rebuilt ${r.views} views from a fresh snapshot of the app's tables in ${(r.ms / 1000).toFixed(1)} s: ${r.rows} rows; slot ${r.slot} made again at ${r.consistentPoint}, where capture streams from.`,
    ...(r.behindSlot === null
      ? []
      : [
          `  the service's database was behind the slot: its checkpoint ${r.lost?.from ?? "-"}, the slot had confirmed ${r.behindSlot}`
        ]),
    r.lost === null
      ? "  no checkpoint before: nothing was lost"
      : `  events for changes between ${r.lost.from} and ${r.lost.to} will not fire (their records' views are current again)`
  ].join("\n")

export const rebuildViewsCommand = databaseCommand(
  "rebuild-views",
  {
    as: asOptional,
    json,
    freshSnapshot: Flag.Boolean("fresh-snapshot").pipe(
      Flag.withDescription(
        "Rebuild from a fresh snapshot of the app's tables through a new slot (capture must be stopped): for a service database restored from a backup older than the slot. Events for changes since its checkpoint will not fire"
      ),
      Flag.withDefault(false)
    )
  },
  (args) =>
    Effect.gen(function* () {
      if (args.freshSnapshot) {
        if (Option.isSome(args.as)) yield* requireSomeAdmin(args.as.value)
        const config = yield* CaptureConfig
        const fresh = yield* freshSnapshot(config)
        writeLog("warn", "views rebuilt from a fresh snapshot", { ...fresh, source: "cli" }, process.stderr)
        return yield* output(args.json, fresh, () => freshSnapshotText(fresh))
      }
      const bar = progressBar("rebuilding views")
      if (Option.isSome(args.as)) yield* requireSomeAdmin(args.as.value)
      const result = yield* rebuildViews((p) =>
        bar.update(
          p.done,
          p.total,
          p.phase === "waiting" ? "waiting for capture's batch" : `rebuilding views (${p.phase})`
        )
      ).pipe(Effect.ensuring(Effect.sync(bar.done)))
      // The JSON answer keeps its fields; what was kept for capture is said in the text.
      const { unshaped: _unshaped, held: _held, ...answer } = result
      yield* output(args.json, answer, () =>
        [
          `Rebuilt ${result.views} views in ${(result.ms / 1000).toFixed(1)} s (checkpoint ${result.checkpoint ?? "none"}).`,
          `  changed: ${result.changed} views differed from the mirror and were rewritten`,
          `  removed: ${result.removed} views of records that no longer exist`,
          ...(result.unshaped + result.held > 0
            ? [
                `  kept:    ${result.unshaped} views of records that could not be shaped and ${result.held} held in quarantine; capture shapes them again and holds those that still fail (capture quarantine list)`
              ]
            : []),
          `  capture waited up to ${(result.pausedCaptureMs / 1000).toFixed(1)} s; its changes waited in the slot and are applied now`
        ].join("\n")
      )
    })
).pipe(
  Command.withDescription(
    "Re-project every view from the mirror of the app tables while the service runs (one transaction: the API switches at once; capture waits meanwhile); with --fresh-snapshot, from the app's tables themselves through a new slot"
  )
)

const leaderText = (l: LeaderInfo) =>
  `${l.applicationName ?? "(application name not visible)"}, backend pid ${l.pid}${l.clientAddress ? ` from ${l.clientAddress}` : ""}, since ${when(l.since)}`

/** Which release this tool is, which the database takes writes from, and each process's. */
const releaseText = (r: OperationsStatus["release"]) => {
  const db = r.database
  const lines = [
    "Releases",
    `  this tool:   ${r.version} (schema generation ${r.generation})`,
    `  database:    ${db === null ? "no schema fence yet" : `schema generation ${db.generation}; takes writes from release ${db.oldestWriter} or newer${db.raisedBy === null ? "" : ` (since ${db.raisedBy})`}`}`,
    `  processes:   ${r.processes.length} seen in the last minute`
  ]
  if (r.processes.length > 0)
    lines.push(
      table(
        ["RELEASE", "GENERATION", "ROLES", "PROCESS", "SINCE", "WRITES"],
        r.processes.map((p) => [
          p.release,
          String(p.generation),
          p.roles.join(","),
          `${p.host}:${p.pid}`,
          when(p.startedAt),
          p.writable ? "yes" : "no: fenced"
        ])
      )
    )
  return lines
}

const verdictText = (v: HealthVerdict) => [`Health: ${v.state.toUpperCase()}`, ...v.reasons.map((r) => `  - ${r}`)]

const statusText = (s: OperationsStatus, health: HealthVerdict) => {
  const c = s.capture
  const mb = (n: number | null) => (n === null ? "-" : `${(n / 1024 / 1024).toFixed(1)} MB`)
  const lines = [
    `Status at ${when(s.at)}`,
    ...verdictText(health),
    "",
    ...releaseText(s.release),
    "",
    "Capture",
    `  slot:        ${c.slot} ${c.slotExists ? `(${c.slotActive ? "active" : "inactive"}, WAL ${c.walStatus ?? "?"})` : "(missing)"}`,
    `  leader:      ${c.leader === null ? "no leader: no capture process is running" : leaderText(c.leader)}`,
    `  checkpoint:  ${c.checkpointLsn ?? "-"} (server ${c.serverLsn}); last commit applied ${when(c.lastCommitAt)}`,
    `  lag:         ${c.lagBytes === null ? "-" : `${c.lagBytes} bytes`}, ${c.lagSeconds === null ? "-" : `${c.lagSeconds.toFixed(1)} s`}`,
    `  retained WAL: ${mb(c.retainedWalBytes)}${c.safeWalBytes === null ? "" : ` (${mb(c.safeWalBytes)} more before the slot is lost)`}${c.walKeepSizeBytes === null ? "" : `; max_slot_wal_keep_size ${mb(c.walKeepSizeBytes)}`}`,
    ...(c.stalledAt
      ? [
          `  STALLED:     since ${when(c.stalledAt)}, ${c.stallReconnects} reconnect${c.stallReconnects === 1 ? "" : "s"} so far: ${c.stallReason ?? "-"}`
        ]
      : []),
    ...(c.gapReason ? [`  GAP:         ${c.gapReason} (at ${when(c.gapAt)}): events in the gap were not derived`] : []),
    `  quarantine:  ${c.quarantine.count} record${c.quarantine.count === 1 ? "" : "s"} held${c.quarantine.first ? ` (first: #${c.quarantine.first.id} app.${c.quarantine.first.table} ${c.quarantine.first.key}: ${c.quarantine.first.error})` : ""}`,
    ...c.quarantine.broken.map((b) => `  BROKEN:      app.${b.table} since ${when(b.since)}: ${b.problems.join("; ")}`),
    ...c.quarantine.resyncing.map(
      (r) => `  resync:      app.${r.table} re-read from the app since ${when(r.since)} (${r.rows} rows so far)`
    ),
    "",
    "Outbox",
    `  backlog:     ${s.outbox.backlog} events not yet fanned out${s.outbox.oldestBacklogAt ? ` (oldest ${when(s.outbox.oldestBacklogAt)})` : ""}`,
    "",
    "Deliveries",
    `  due now ${s.deliveries.due}, scheduled ${s.deliveries.scheduled}, in flight ${s.deliveries.inFlight}, failing (retrying) ${s.deliveries.failing}, held ${s.deliveries.held}, failed in the last 24 h ${s.deliveries.failedLast24h}`,
    "",
    `Endpoints switched off: ${s.endpointsSwitchedOff.length}`
  ]
  if (s.endpointsSwitchedOff.length > 0) {
    lines.push(
      table(
        ["ID", "NAME", "URL", "SINCE", "HELD", "WHY"],
        s.endpointsSwitchedOff.map((e) => [e.id, e.name, e.url, when(e.disabledAt), String(e.held), e.reason ?? "-"])
      )
    )
  }
  lines.push("", `Replays running: ${s.replays.length}`)
  if (s.replays.length > 0) {
    lines.push(
      table(
        ["ID", "DESTINATION", "SENT", "QUEUED", "REMAINING", "SINCE", "WAITING"],
        s.replays.map((r) => [
          r.id,
          `${r.destination.kind} ${r.destination.id}`,
          String(r.progress.sent),
          String(r.progress.queued),
          String(r.progress.remaining),
          when(r.createdAt),
          r.waiting ?? "-"
        ])
      )
    )
  }
  if (s.readReplicas.length > 0) {
    lines.push("", `Read replicas: ${s.readReplicas.length}`)
    lines.push(
      table(
        ["REPLICA", "LAG", "READ FROM", "WHY NOT"],
        s.readReplicas.map((r) => [
          r.replica,
          r.lagSeconds === null ? "-" : `${r.lagSeconds.toFixed(1)} s`,
          r.usable ? "yes" : "no",
          r.problem ?? "-"
        ])
      )
    )
  }
  lines.push("", `Keys expiring within ${KEY_EXPIRY_WARNING_DAYS} days: ${s.keysNearExpiry.length}`)
  if (s.keysNearExpiry.length > 0) {
    lines.push(
      table(
        ["ID", "NAME", "COMPANY", "EXPIRES", "SUBSCRIPTIONS"],
        s.keysNearExpiry.map((k) => [k.id, k.name, k.companyId, when(k.expiresAt), String(k.subscriptions)])
      )
    )
  }
  return lines.join("\n")
}

/** Exits with the verdict's code once the answer is printed (0 healthy: a plain success). */
const exitFor = (health: HealthVerdict) =>
  health.state === "healthy" ? Effect.void : Effect.fail(new ExitWith({ code: HEALTH_EXIT_CODES[health.state] }))

export const statusCommand = Command.make(
  "status",
  {
    as: asOptional,
    json,
    lagThreshold: Flag.Int("lag-threshold").pipe(
      Flag.withDescription(`Capture further behind than this many seconds is degraded (exit 1)`),
      Flag.withDefault(LAG_THRESHOLD_SECONDS)
    )
  },
  (args) =>
    Effect.gen(function* () {
      const { slot } = yield* CaptureConfig
      const readReplicas = yield* loadReadReplicas
      const read = yield* Effect.exit(
        withDatabase(
          Effect.gen(function* () {
            if (Option.isSome(args.as)) yield* requireSomeAdmin(args.as.value)
            return yield* operationsStatus(slot, readReplicas)
          })
        )
      )
      if (Exit.isFailure(read)) {
        const failure = Cause.findErrorOption(read.cause)
        // A refusal says what to fix (an unpatched postgres.js, a server that cannot feed capture):
        // it is printed as every command prints one, exit 1.
        if (
          (Option.isSome(failure) && (isDomainError(failure.value) || isStartRefused(failure.value))) ||
          Cause.hasInterruptsOnly(read.cause)
        ) {
          return yield* Effect.failCause(read.cause)
        }
        // The database does not answer: that is the answer, broken.
        const health = databaseDown(Cause.squash(read.cause))
        yield* output(args.json, { at: new Date().toISOString(), health }, () => verdictText(health).join("\n"))
        return yield* exitFor(health)
      }
      const health = assessStatus(read.value, { lagThresholdSeconds: args.lagThreshold })
      yield* output(args.json, { ...read.value, health }, () => statusText(read.value, health))
      return yield* exitFor(health)
    })
).pipe(
  Command.withDescription(
    "The releases (this tool's, the oldest the database's schema fence takes writes from, each process running and whether it may write), capture (who leads it, slot, checkpoint, lag, retained WAL, a stall, gaps), the outbox backlog, deliveries due and failing, endpoints switched off and why, replays running and how far they are, keys near expiry, the read replicas' lag (READ_DATABASE_URL). Exit code: 0 healthy, 1 degraded (capture behind or stalled, records held in quarantine, no capture leader, endpoints switched off, a read replica skipped, a process of a release the schema fence stopped), 2 broken (the slot lost, an app table that no longer fits what capture reads, the database down)"
  )
)
