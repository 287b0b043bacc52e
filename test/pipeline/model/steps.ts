// The model's histories as data: what the app does to its tables, and the faults that strike
// capture meanwhile. Steps name records by kind and position ("the 3rd incident still there",
// counted modulo how many there are), never by id, so any part of a history is a history too
// and a failing one shrinks to the few steps that matter.
import fc from "fast-check"

export const KINDS = ["incident", "action", "inspection", "audit", "change", "permit", "observation"] as const
export type Kind = (typeof KINDS)[number]

/** One statement of the app's, inside a transaction. */
export type AppOp =
  /** `long`: an incident's description is long enough for PostgreSQL to store it out of line. */
  | { readonly op: "create"; readonly kind: Kind; readonly variant: number; readonly long?: boolean }
  | { readonly op: "edit"; readonly kind: Kind; readonly n: number; readonly variant: number }
  | { readonly op: "privacy"; readonly n: number; readonly on: boolean }
  | { readonly op: "poison"; readonly n: number; readonly bad: boolean }
  | { readonly op: "item"; readonly kind: "audit" | "inspection"; readonly n: number }
  | { readonly op: "delete"; readonly kind: Kind; readonly n: number }
  | { readonly op: "site"; readonly n: number }
  | { readonly op: "move"; readonly n: number }
  | { readonly op: "module"; readonly on: boolean }
  | { readonly op: "truncate"; readonly table: "permits" | "incidents" }

/** Columns the model renames out of the service's shape, and back. */
export const RENAMES = [
  ["incidents", "description"],
  ["inspections", "checklist"],
  ["inspections", "outcome"]
] as const
export type Rename = (typeof RENAMES)[number]

export type Step =
  /** One small transaction of the app's. */
  | { readonly t: "txn"; readonly ops: ReadonlyArray<AppOp> }
  /** One transaction past the large-transaction threshold: the ops among padding inserts. */
  | { readonly t: "large"; readonly ops: ReadonlyArray<AppOp>; readonly pad: number }
  /** A column renamed out of shape (the app's DDL). */
  | { readonly t: "rename"; readonly which: number }
  /** Every renamed column renamed back; the runner waits until capture has re-read the tables. */
  | { readonly t: "unrename"; readonly killAfterMs: number | null }
  /** Capture SIGKILLed, now or after a delay while the next steps run, and started again. */
  | { readonly t: "kill"; readonly afterMs: number }
  /** The app's PostgreSQL (with one database, the service's too) stopped and started. */
  | { readonly t: "pg-restart" }
  /**
   * The app's PostgreSQL (with one database, the service's too) crashed (an immediate
   * shutdown: what its WAL buffers held is lost) and started again, once capture has applied
   * everything committed and the follower has read it; `afterMs` later, or, with `writes`,
   * `afterMs` after the app began them (one after the other, until the crash cuts them; those
   * after it are not made). `{ t: "pg-crash" }`: at once, no writes.
   */
  | {
      readonly t: "pg-crash"
      readonly afterMs?: number
      readonly writes?: ReadonlyArray<ReadonlyArray<AppOp>>
      /** With writes: after each, the follower reads a page of at most this many changes. */
      readonly page?: number
    }
  /**
   * The service's database crashed alone (split layout; in the one layout, as pg-crash), once
   * capture has applied everything committed and the follower has read it: its batches
   * committed asynchronously and not yet flushed are lost, and capture writes them again from
   * the slot, maybe cut otherwise. With `writes`, the crash comes `afterMs` after the app began
   * them, and the app goes on through it (its database stays up); the follower reads a page
   * after each (while the service's database can), and as many again once it is back.
   */
  | {
      readonly t: "service-crash"
      readonly afterMs?: number
      readonly writes?: ReadonlyArray<ReadonlyArray<AppOp>>
      readonly page?: number
    }
  /** The slot dropped while capture is down (as max_slot_wal_keep_size does); the app writes meanwhile. */
  | { readonly t: "slot-drop"; readonly gap: ReadonlyArray<ReadonlyArray<AppOp>> }
  /** rebuild-views --fresh-snapshot while capture is down; the app writes before it. */
  | { readonly t: "fresh"; readonly gap: ReadonlyArray<ReadonlyArray<AppOp>> }
  /** rebuild-views while capture runs. */
  | { readonly t: "rebuild" }
  /** The operator's `capture quarantine retry --all`. */
  | { readonly t: "retry" }
  /** The operator discards the n-th held record. */
  | { readonly t: "discard"; readonly n: number }
  /** The runner waits until capture has applied everything committed. */
  | { readonly t: "settle" }

/** Where the service's tables live: beside the app's in one database, or in a database on a cluster of its own. */
export type Layout = "one" | "split"

export interface ModelConfig {
  /** Absent: "one" (the histories found before there was a choice). */
  readonly layout?: Layout
  /** Who makes the publication: a DBA before the first start (from the setup SQL), or the service at it. */
  readonly publication: "dba" | "service"
  readonly batchChanges: number
  readonly largeTransaction: number
  readonly heldInMemory: number
  readonly resyncChunk: number
}

export interface History {
  readonly config: ModelConfig
  /** What the app does before the service's first start: those rows are there already. */
  readonly before: ReadonlyArray<Step>
  readonly steps: ReadonlyArray<Step>
}

const n = fc.nat({ max: 30 })
const kind = fc.constantFrom(...KINDS)

export const appOp: fc.Arbitrary<AppOp> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({ op: fc.constant("create" as const), kind, variant: fc.nat({ max: 5 }), long: fc.boolean() })
  },
  { weight: 6, arbitrary: fc.record({ op: fc.constant("edit" as const), kind, n, variant: fc.nat({ max: 5 }) }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant("privacy" as const), n, on: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("poison" as const), n, bad: fc.boolean() }) },
  {
    weight: 2,
    arbitrary: fc.record({ op: fc.constant("item" as const), kind: fc.constantFrom("audit", "inspection"), n })
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("delete" as const), kind, n }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("site" as const), n }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("move" as const), n }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("module" as const), on: fc.boolean() }) },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant("truncate" as const), table: fc.constantFrom("permits", "incidents") })
  }
)

const ops = (max: number) => fc.array(appOp, { minLength: 1, maxLength: max })
const gap = fc.array(ops(3), { maxLength: 3 })

export const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 30, arbitrary: fc.record({ t: fc.constant("txn" as const), ops: ops(4) }) },
  {
    weight: 3,
    arbitrary: fc.record({ t: fc.constant("large" as const), ops: ops(6), pad: fc.integer({ min: 0, max: 30 }) })
  },
  {
    weight: 2,
    arbitrary: fc.record({ t: fc.constant("rename" as const), which: fc.nat({ max: RENAMES.length - 1 }) })
  },
  {
    weight: 2,
    arbitrary: fc.record({
      t: fc.constant("unrename" as const),
      killAfterMs: fc.option(fc.integer({ min: 0, max: 400 }), { freq: 3 })
    })
  },
  { weight: 4, arbitrary: fc.record({ t: fc.constant("kill" as const), afterMs: fc.integer({ min: 0, max: 300 }) }) },
  { weight: 1, arbitrary: fc.constant({ t: "pg-restart" as const }) },
  {
    weight: 1,
    arbitrary: fc.record({
      t: fc.constant("pg-crash" as const),
      afterMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 150 })),
      writes: fc.oneof(fc.constant([]), fc.array(ops(3), { minLength: 1, maxLength: 8 })),
      page: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined })
    })
  },
  {
    weight: 2,
    arbitrary: fc.record({
      t: fc.constant("service-crash" as const),
      afterMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 300 })),
      writes: fc.oneof(fc.constant([]), fc.array(ops(3), { minLength: 1, maxLength: 10 })),
      page: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined })
    })
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("slot-drop" as const), gap }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("fresh" as const), gap }) },
  { weight: 1, arbitrary: fc.constant({ t: "rebuild" as const }) },
  { weight: 1, arbitrary: fc.constant({ t: "retry" as const }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("discard" as const), n }) },
  { weight: 2, arbitrary: fc.constant({ t: "settle" as const }) }
)

const beforeStep: fc.Arbitrary<Step> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ t: fc.constant("txn" as const), ops: ops(3) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("rename" as const), which: fc.nat({ max: RENAMES.length - 1 }) }) }
)

export const config: fc.Arbitrary<ModelConfig> = fc.record({
  layout: fc.constantFrom("one" as const, "split" as const),
  publication: fc.constantFrom("dba" as const, "service" as const),
  batchChanges: fc.constantFrom(3, 50, 2000),
  largeTransaction: fc.constantFrom(12, 40),
  heldInMemory: fc.constantFrom(1, 20_000),
  resyncChunk: fc.constantFrom(2, 1000)
})

export const history = (maxSteps = 25): fc.Arbitrary<History> =>
  fc.record({
    config,
    before: fc.array(beforeStep, { maxLength: 6 }),
    steps: fc.array(step, { minLength: 1, maxLength: maxSteps })
  })

/** A history in one line per step, for a failure's report. */
export const describeHistory = (h: History): string =>
  [
    `config ${JSON.stringify(h.config)}`,
    ...h.before.map((s) => `before: ${JSON.stringify(s)}`),
    ...h.steps.map((s, i) => `${i + 1}. ${JSON.stringify(s)}`)
  ].join("\n")
