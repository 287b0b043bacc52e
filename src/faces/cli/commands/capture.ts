// `capture quarantine list|retry|discard`: the records capture holds because it could not shape
// them (docs/operations.md, "Quarantine"). Retry and discard go to capture through the WAL, so
// it applies them in stream order with its checkpoint; the command waits (up to 30 s) to say how
// it went. Each request is written in the activity log of the record's company.
import { Effect, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { at, invalid, notFound, words } from "../../../domain/errors.ts"
import { type Actor, SYSTEM, writeActivity } from "../../../access/activity.ts"
import { findAdmin, companyById } from "../../../access/identity.ts"
import { transaction } from "../../../platform/db/Sql.ts"
import {
  appliedPast,
  listQuarantine,
  type QuarantineEntry,
  quarantineEntries,
  quarantineEntry,
  retryableEntries,
  sendRequest
} from "../../../pipeline/capture/quarantine/operators.ts"
import { asOptional, CheckFailed, databaseCommand, idArgument, json, listing, output, when } from "../support.ts"

const WAIT_MS = 30_000

const entryLine = (e: QuarantineEntry) => [
  e.id,
  `app.${e.table}`,
  e.key,
  e.companyId ?? "-",
  when(e.firstSeen),
  when(e.lastSeen),
  String(e.attempts),
  e.error
]

const list = databaseCommand("list", { as: asOptional, json }, (args) =>
  Effect.gen(function* () {
    if (Option.isSome(args.as)) yield* findAdmin(args.as.value)
    const entries = yield* listQuarantine()
    yield* output(args.json, entries, () =>
      listing(
        entries,
        { empty: "Nothing is held in quarantine.", title: `${entries.length} record(s) held in quarantine` },
        ["ID", "TABLE", "KEY", "COMPANY", "FIRST SEEN", "LAST SEEN", "ATTEMPTS", "ERROR"],
        () => entries.map(entryLine)
      )
    )
  })
).pipe(Command.withDescription("The records capture holds: their view keeps its last good state, their events wait"))

/** The actor of a request: the admin named by --as (of the entry's company), else the service. */
const actorFor = (as: Option.Option<string>, e: QuarantineEntry) =>
  Effect.gen(function* () {
    if (Option.isNone(as)) return SYSTEM
    const company = e.companyId === null ? undefined : yield* companyById(e.companyId)
    const admin = yield* findAdmin(as.value, company)
    const actor: Actor = { kind: "user", id: admin.userId, email: admin.email }
    return actor
  })

/**
 * Sends the request with its activity entries, then waits until capture has applied it: past it
 * in its stream, and (a retry) every entry shaped again or tried again since. A retry of a
 * record whose row lacks a value re-reads that row from the app first, so it can take a moment more.
 */
const request = (
  op: "retry" | "discard",
  entries: ReadonlyArray<QuarantineEntry>,
  as: Option.Option<string>,
  all = false
) =>
  Effect.gen(function* () {
    const actors = yield* Effect.forEach(entries, (e) => actorFor(as, e))
    const sent = yield* transaction(
      Effect.gen(function* () {
        for (let i = 0; i < entries.length; i++) {
          const e = entries[i]!
          // The activity log is kept per company: a record whose company is not known has none.
          if (e.companyId === null) continue
          yield* writeActivity({
            companyId: e.companyId,
            actor: actors[i]!,
            kind: op === "retry" ? "quarantine.retried" : "quarantine.discarded",
            subjectId: e.id,
            details: { table: `app.${e.table}`, key: e.key, lsn: e.lsn, error: e.error }
          })
        }
        // Every retryable entry up to the newest listed: the request stays small however many.
        return yield* sendRequest(
          all
            ? { op, all: true, upTo: entries.reduce((m, e) => (BigInt(e.id) > BigInt(m) ? e.id : m), "0") }
            : { op, records: entries.map((e) => [e.table, e.key] as const) }
        )
      })
    )
    const { lsn } = sent
    const deadline = Date.now() + WAIT_MS
    const late = () =>
      new CheckFailed({
        message: `capture has not reached the request yet (WAL ${lsn}); it applies it when it does (is a capture leader running? see status)`
      })
    while (!(yield* appliedPast(lsn))) {
      if (Date.now() > deadline) return yield* late()
      yield* Effect.sleep(200)
    }
    const ids = entries.map((e) => e.id)
    for (;;) {
      const left = yield* quarantineEntries(ids)
      // Held still: tried again after the request (a retry), or still there (a discard: held again by a later change).
      const pending = op === "retry" ? left.filter((e) => Date.parse(e.lastSeen) < sent.at.getTime()) : []
      if (pending.length === 0) return { lsn, still: left }
      if (Date.now() > deadline)
        return yield* new CheckFailed({
          message: `capture has not shaped ${pending.length} of them again yet (WAL ${lsn}); see capture quarantine list`
        })
      yield* Effect.sleep(200)
    }
  })

const idArg = idArgument("The held record's id (see capture quarantine list)").pipe(Argument.optional)

const retry = databaseCommand(
  "retry",
  {
    id: idArg,
    all: Flag.Boolean("all").pipe(Flag.withDescription("Every held record whose table fits"), Flag.withDefault(false)),
    as: asOptional,
    json
  },
  (args) =>
    Effect.gen(function* () {
      if (Option.isSome(args.id) === args.all)
        return yield* invalid(words`give the held record's id (see capture quarantine list), or ${at("all")}`)
      const entries = args.all
        ? yield* retryableEntries()
        : [
            (yield* quarantineEntry(Option.getOrElse(args.id, () => ""))) ??
              (yield* notFound(
                `no held record with id ${Option.getOrElse(args.id, () => "")} (see capture quarantine list)`
              ))
          ]
      if (entries.length === 0)
        return yield* output(args.json, { retried: 0, stillHeld: [] }, () => "Nothing to retry.")
      const { lsn, still } = yield* request("retry", entries, args.as, args.all)
      const answer = { retried: entries.length, shaped: entries.length - still.length, stillHeld: still, lsn }
      yield* output(args.json, answer, () =>
        [
          `Retried ${entries.length} held record(s) at WAL ${lsn}: ${answer.shaped} shaped again (views written, the events they owed sent once).`,
          ...still.map((e) => `  still held: #${e.id} app.${e.table} ${e.key} (attempt ${e.attempts}): ${e.error}`)
        ].join("\n")
      )
      if (still.length > 0)
        return yield* new CheckFailed({ message: `${still.length} record(s) still cannot be shaped` })
    })
).pipe(
  Command.withDescription(
    "Shape held records again from their current rows: those that shape get their view and the events they owe, once; the others stay held (exit 1)"
  )
)

const discard = databaseCommand(
  "discard",
  {
    id: idArgument("The held record's id (see capture quarantine list)"),
    as: asOptional,
    json
  },
  (args) =>
    Effect.gen(function* () {
      const entry =
        (yield* quarantineEntry(args.id)) ??
        (yield* notFound(`no held record with id ${args.id} (see capture quarantine list)`))
      const { lsn, still } = yield* request("discard", [entry], args.as)
      yield* output(args.json, { discarded: still.length === 0 ? 1 : 0, lsn, entry }, () =>
        still.length === 0
          ? `Discarded #${entry.id} (app.${entry.table} ${entry.key}): the events it owed are not sent; its view stays as it is until its next change.`
          : `#${entry.id} is held again (its next change could not be shaped either).`
      )
    })
).pipe(
  Command.withDescription(
    "Drop a held record from quarantine: the events it owes are not sent, its view stays until its next change shapes it"
  )
)

const quarantine = Command.make("quarantine").pipe(
  Command.withDescription("Records capture could not shape: list, retry, discard"),
  Command.withSubcommands([list, retry, discard])
)

export const capture = Command.make("capture").pipe(
  Command.withDescription("Change capture: the quarantine of records it could not shape"),
  Command.withSubcommands([quarantine])
)
