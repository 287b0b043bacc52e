// Capture against its model (docs/design.md, "Checked against a model"): histories of the app's
// changes under faults, run through the real pipeline on a PostgreSQL of their own (two when the
// service's database is apart), each ended by the oracle's verdict (oracle.ts). First the
// histories that once broke capture's promises, as they were found, and those written for a
// fault; then random ones: fixed seeds, and one new seed per run, printed, which
// `npm run check:model -- --runs 1 --seed <seed>` replays (a failure prints its seed and path).
// Longer runs: `npm run check:model -- --runs 2000`.
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { runHistory } from "./run.ts"
import { describeHistory, type History, history, type ModelConfig } from "./steps.ts"
import { ModelWorld } from "./world.ts"

const config = (over: Partial<ModelConfig> = {}): ModelConfig => ({
  publication: "dba",
  batchChanges: 50,
  largeTransaction: 12,
  heldInMemory: 20_000,
  resyncChunk: 1000,
  ...over
})

/** Histories that broke a promise of capture's, each as found (by a reviewer, or by the model). */
const FOUND: ReadonlyArray<readonly [string, History]> = [
  [
    "rows there before the first start, in tables out of shape then, fire nothing once the tables fit",
    {
      config: config(),
      before: [
        {
          t: "txn",
          ops: [
            { op: "create", kind: "incident", variant: 1 },
            { op: "create", kind: "inspection", variant: 1 }
          ]
        },
        { t: "rename", which: 0 },
        { t: "rename", which: 1 }
      ],
      steps: [{ t: "unrename", killAfterMs: null }]
    }
  ],
  [
    "a slot lost while a table is out of shape: the views kept, the table read again, capture not stuck",
    {
      config: config(),
      before: [],
      steps: [
        { t: "txn", ops: [{ op: "create", kind: "inspection", variant: 1 }] },
        { t: "settle" },
        { t: "rename", which: 1 },
        { t: "slot-drop", gap: [] },
        { t: "unrename", killAfterMs: null }
      ]
    }
  ],
  [
    "a held incident becomes a privacy case in a large transaction: no copy keeps the person's details",
    {
      config: config(),
      before: [],
      steps: [
        { t: "txn", ops: [{ op: "create", kind: "incident", variant: 0 }] },
        { t: "settle" },
        { t: "rename", which: 0 },
        { t: "txn", ops: [{ op: "edit", kind: "incident", n: 0, variant: 0 }] },
        { t: "large", ops: [{ op: "privacy", n: 0, on: true }], pad: 0 },
        { t: "unrename", killAfterMs: null }
      ]
    }
  ],
  [
    "a publication the service makes while a column is out of shape: only that table waits, until it fits",
    {
      config: config({ publication: "service" }),
      before: [
        { t: "txn", ops: [{ op: "create", kind: "inspection", variant: 1 }] },
        { t: "rename", which: 1 }
      ],
      steps: [
        {
          t: "txn",
          ops: [
            { op: "create", kind: "inspection", variant: 3 },
            { op: "create", kind: "incident", variant: 0 }
          ]
        },
        { t: "unrename", killAfterMs: null }
      ]
    }
  ],
  [
    "an incident that became a privacy case while the slot was lost: its stored events lose the details",
    {
      config: config(),
      before: [],
      steps: [
        { t: "txn", ops: [{ op: "create", kind: "incident", variant: 0 }] },
        { t: "settle" },
        { t: "slot-drop", gap: [[{ op: "privacy", n: 0, on: true }]] }
      ]
    }
  ],
  [
    "a held incident that becomes a privacy case: its kept view loses the details",
    {
      config: config(),
      before: [],
      steps: [
        { t: "txn", ops: [{ op: "create", kind: "incident", variant: 0 }] },
        { t: "settle" },
        { t: "rename", which: 0 },
        { t: "txn", ops: [{ op: "privacy", n: 0, on: true }] }
      ]
    }
  ],
  [
    "a record made and held in one batch keeps the view it showed first",
    {
      config: config({ batchChanges: 2000 }),
      before: [],
      steps: [
        { t: "txn", ops: [{ op: "create", kind: "audit", variant: 0 }] },
        { t: "txn", ops: [{ op: "poison", n: 0, bad: true }] }
      ]
    }
  ],
  [
    "a table out of shape at the first start: its records wait for it, whatever touches them meanwhile",
    {
      config: config(),
      before: [
        { t: "rename", which: 1 },
        { t: "txn", ops: [{ op: "create", kind: "inspection", variant: 0 }] }
      ],
      steps: [
        {
          t: "txn",
          ops: [
            { op: "item", kind: "inspection", n: 0 },
            { op: "site", n: 0 }
          ]
        },
        { t: "rebuild" }
      ]
    }
  ],
  [
    "a held incident that is a privacy case for a while, then not: its kept view is one capture wrote",
    {
      config: { publication: "dba", batchChanges: 3, largeTransaction: 12, heldInMemory: 1, resyncChunk: 2 },
      before: [],
      steps: [
        {
          t: "txn",
          ops: [
            { op: "create", kind: "incident", variant: 0 },
            { op: "item", kind: "audit", n: 0 }
          ]
        },
        { t: "rename", which: 0 },
        { t: "txn", ops: [{ op: "privacy", n: 0, on: true }] },
        {
          t: "txn",
          ops: [
            { op: "privacy", n: 0, on: false },
            { op: "edit", kind: "incident", n: 0, variant: 0 }
          ]
        }
      ]
    }
  ],
  [
    "a record gone while the slot was lost leaves no change that names it",
    {
      config: { publication: "dba", batchChanges: 3, largeTransaction: 12, heldInMemory: 1, resyncChunk: 2 },
      before: [{ t: "txn", ops: [{ op: "create", kind: "incident", variant: 0 }] }],
      steps: [
        { t: "txn", ops: [{ op: "privacy", n: 0, on: false }] },
        {
          t: "slot-drop",
          gap: [[{ op: "truncate", table: "incidents" }], [{ op: "create", kind: "permit", variant: 2 }]]
        }
      ]
    }
  ],
  [
    "an inspection failed, passed and failed again, the last two in one batch: an event, and the follower's copy still right",
    {
      // Once a false alarm of the model's own, which wanted a change at every event: the batch
      // left the view as it was, so it wrote no change, and a follower's copy was already right.
      config: { publication: "dba", batchChanges: 3, largeTransaction: 12, heldInMemory: 1, resyncChunk: 2 },
      before: [],
      steps: [
        { t: "txn", ops: [{ op: "create", kind: "inspection", variant: 3 }] },
        { t: "txn", ops: [{ op: "edit", kind: "inspection", n: 0, variant: 0 }] },
        { t: "txn", ops: [{ op: "edit", kind: "inspection", n: 0, variant: 5 }] }
      ]
    }
  ],
  [
    "a delete between two creates in one batch: committedAt never goes back along the stream",
    {
      // Found by the stream's follower test on a loaded machine: a batch's upserts took its last
      // commit's time, its deletes their own, so a delete came after an upsert with a later time.
      config: config(),
      before: [{ t: "txn", ops: [{ op: "create", kind: "permit", variant: 0 }] }],
      steps: [
        { t: "kill", afterMs: 0 },
        { t: "txn", ops: [{ op: "create", kind: "incident", variant: 0 }] },
        { t: "txn", ops: [{ op: "delete", kind: "permit", n: 0 }] },
        { t: "txn", ops: [{ op: "create", kind: "action", variant: 0 }] }
      ]
    }
  ],
  [
    "a discarded poison record is held again by rebuild-views, which cannot shape it either",
    {
      // Once a false alarm of the model's own, which knew nothing of rebuild-views' re-shaping.
      config: { publication: "dba", batchChanges: 3, largeTransaction: 12, heldInMemory: 1, resyncChunk: 2 },
      before: [],
      steps: [
        { t: "txn", ops: [{ op: "create", kind: "audit", variant: 5 }] },
        { t: "discard", n: 0 },
        { t: "rebuild" },
        { t: "txn", ops: [{ op: "create", kind: "incident", variant: 0 }] }
      ]
    }
  ],
  [
    "a record discarded while its table is out of shape owes nothing it could not read when the table fits",
    {
      // Once a false alarm of the model's own: it took the outcome capture could not read at the
      // discard as known, and wanted inspection.failed when the table fit again.
      config: { publication: "dba", batchChanges: 3, largeTransaction: 12, heldInMemory: 1, resyncChunk: 2 },
      before: [{ t: "rename", which: 2 }],
      steps: [
        { t: "txn", ops: [{ op: "create", kind: "inspection", variant: 0 }] },
        { t: "discard", n: 0 },
        { t: "txn", ops: [{ op: "edit", kind: "inspection", n: 0, variant: 3 }] },
        { t: "unrename", killAfterMs: 124 }
      ]
    }
  ],
  [
    "an item added after its equipment's move, and a rename met later in the same batch: the item stays in the view",
    {
      // Found by the model (seed 20261213): the catch-up batch was shaped whole, held the
      // inspection at the rename, and was then cut after the move; its second part was shaped
      // with the rename already counted, so the item's insert was held and lost from the view.
      config: { publication: "dba", batchChanges: 3, largeTransaction: 12, heldInMemory: 1, resyncChunk: 2 },
      before: [{ t: "txn", ops: [{ op: "create", kind: "inspection", variant: 3 }] }],
      steps: [
        { t: "kill", afterMs: 0 },
        { t: "txn", ops: [{ op: "move", n: 0 }] },
        { t: "txn", ops: [{ op: "item", kind: "inspection", n: 0 }] },
        { t: "rename", which: 2 },
        { t: "txn", ops: [{ op: "edit", kind: "inspection", n: 0, variant: 0 }] }
      ]
    }
  ],
  [
    "an inspection held in the batch of an earlier move of its equipment keeps the view that move showed",
    {
      // Found by the model (seed 20261204): capture restarted and caught up with the equipment's
      // move and the inspection's edit (held: its table out of shape) in one batch, and the held
      // inspection kept its view from before the move, which one batch per transaction showed.
      config: { publication: "dba", batchChanges: 3, largeTransaction: 12, heldInMemory: 1, resyncChunk: 2 },
      before: [{ t: "txn", ops: [{ op: "create", kind: "inspection", variant: 3 }] }],
      steps: [
        { t: "kill", afterMs: 0 },
        { t: "rename", which: 1 },
        { t: "txn", ops: [{ op: "move", n: 23 }] },
        { t: "txn", ops: [{ op: "edit", kind: "inspection", n: 13, variant: 0 }] }
      ]
    }
  ],
  [
    "a held privacy case's redacted view takes the commit time of its own change, not the batch's last",
    {
      // Found by the model (seed 20261206, shrunk by hand): capture caught up with an incident
      // made a privacy case (held: its table out of shape, so its kept view is redacted) and a
      // later action in one batch; the incident's change took the batch's last commit time at
      // its own earlier place, and the action after it in the stream showed an earlier time.
      config: { publication: "dba", batchChanges: 50, largeTransaction: 12, heldInMemory: 1, resyncChunk: 2 },
      before: [{ t: "txn", ops: [{ op: "create", kind: "incident", variant: 0 }] }],
      steps: [
        { t: "rename", which: 0 },
        { t: "kill", afterMs: 0 },
        { t: "txn", ops: [{ op: "privacy", n: 0, on: true }] },
        { t: "txn", ops: [{ op: "create", kind: "action", variant: 4 }] }
      ]
    }
  ],
  [
    "PostgreSQL crashes while the app writes, and the app writes again after it",
    {
      // Once a false alarm of the model's own (seed 11, the first with crashes): a database
      // cloned from the template had sequences that wrote no WAL before their first values, so
      // after the crash the oracle's log handed out a number a committed entry held.
      config: { publication: "dba", batchChanges: 3, largeTransaction: 12, heldInMemory: 1, resyncChunk: 2 },
      before: [],
      steps: [
        {
          t: "txn",
          ops: [
            { op: "create", kind: "incident", variant: 0 },
            { op: "item", kind: "audit", n: 0 }
          ]
        },
        { t: "pg-crash", afterMs: 0, writes: [[{ op: "create", kind: "incident", variant: 0 }]] },
        { t: "txn", ops: [{ op: "create", kind: "incident", variant: 0 }] },
        { t: "rebuild" }
      ]
    }
  ],
  [
    "a permit made, read by the follower, and deleted, all in batches the service's database loses",
    {
      // Found by the model (seed 121, the split layout's first run; shrunk by hand; about 3 runs
      // in 5 met it): the follower read the permit's making from a batch the crash then took;
      // the replay put the making and the deletion in one batch, which left no view to delete
      // and so no change: the follower kept the permit. Now such a record leaves a tombstone.
      config: config({ layout: "split", batchChanges: 3, heldInMemory: 1, resyncChunk: 2 }),
      before: [],
      steps: [
        {
          t: "service-crash",
          afterMs: 150,
          writes: [
            [{ op: "create", kind: "permit", variant: 0 }],
            [{ op: "create", kind: "incident", variant: 0 }],
            [{ op: "delete", kind: "permit", n: 0 }],
            [{ op: "create", kind: "action", variant: 0 }],
            [{ op: "create", kind: "observation", variant: 0 }],
            [{ op: "create", kind: "incident", variant: 1 }]
          ],
          page: 1
        }
      ]
    }
  ],
  [
    "a table's re-read applied in batches the service's database loses is applied again from the stream, as it was",
    {
      // Found by the model (seed 1160202553, history 1; shrunk by hand): the crash took the
      // batches that applied a re-read of inspections (their rows lived in the run that read
      // them), so the held inspection was released only by a later read, with a later site in
      // its event, or not before the history ended. Now a re-read's rows travel in its high
      // watermark, and a replay applies them at the same place.
      config: config({ layout: "split", batchChanges: 3, heldInMemory: 1, resyncChunk: 2 }),
      before: [{ t: "rename", which: 1 }],
      steps: [
        { t: "txn", ops: [{ op: "create", kind: "inspection", variant: 1 }] },
        { t: "unrename", killAfterMs: null },
        {
          t: "service-crash",
          afterMs: 0,
          writes: [[{ op: "create", kind: "incident", variant: 0 }], [{ op: "site", n: 0 }]]
        },
        {
          t: "txn",
          ops: [
            { op: "site", n: 0 },
            { op: "site", n: 1 }
          ]
        }
      ]
    }
  ]
]

/** Histories written for a fault random ones meet too rarely, so every run has it. */
const CHOSEN: ReadonlyArray<readonly [string, History]> = [
  [
    "the service's own PostgreSQL crashes while the app writes and the follower reads pages: it finds the lost batches again after its offset",
    {
      // The service's database on a cluster of its own: nothing of the app's flushes capture's
      // asynchronous batches there, so the crash takes every batch since the settle, pages the
      // follower read among them, and capture writes them again from the slot.
      config: { ...config({ batchChanges: 3, heldInMemory: 1, resyncChunk: 2 }), layout: "split" },
      before: [],
      steps: [
        {
          t: "txn",
          ops: [
            { op: "create", kind: "incident", variant: 0 },
            { op: "item", kind: "audit", n: 0 }
          ]
        },
        {
          t: "service-crash",
          afterMs: 100,
          writes: [
            [
              { op: "create", kind: "incident", variant: 1 },
              { op: "create", kind: "action", variant: 0 }
            ],
            [{ op: "edit", kind: "incident", n: 0, variant: 2 }],
            [
              { op: "create", kind: "permit", variant: 0 },
              { op: "item", kind: "audit", n: 0 }
            ],
            [
              { op: "edit", kind: "incident", n: 1, variant: 3 },
              { op: "delete", kind: "action", n: 0 }
            ],
            [{ op: "create", kind: "inspection", variant: 3 }],
            [{ op: "edit", kind: "permit", n: 0, variant: 1 }]
          ],
          page: 1
        },
        { t: "txn", ops: [{ op: "create", kind: "incident", variant: 0 }] },
        { t: "rebuild" }
      ]
    }
  ]
]

/** Seeds run every time; one more is new each run. */
const SEEDS = [1, 2, 3]
const RUNS_PER_SEED = 6

describe("capture agrees with its model", () => {
  let server: ModelWorld
  beforeAll(async () => {
    server = await ModelWorld.start()
  }, 60_000)
  afterAll(async () => {
    await server?.stop()
  })

  for (const [name, h] of [...FOUND, ...CHOSEN]) {
    it(name, async () => {
      const v = await runHistory(server, h)
      expect(v.problems, `${describeHistory(h)}\ncapture's last lines:\n${v.logs.join("\n")}`).toEqual([])
    }, 90_000)
  }

  it("random histories of the app's changes under faults break none of its promises", {
    timeout: 600_000 // a budget for a busy 2-core machine, not a measure (about a minute alone)
  }, async () => {
    const fresh = Math.floor(Math.random() * 2 ** 31)
    // Printed, so a failure of the new seed replays: npm run check:model -- --runs 6 --seed <seed>
    console.log(`model: fixed seeds ${SEEDS.join(", ")} and the new seed ${fresh}, ${RUNS_PER_SEED} histories each`)
    for (const seed of [...SEEDS, fresh]) {
      await fc.assert(
        fc.asyncProperty(history(20), async (h) => {
          const v = await runHistory(server, h)
          if (!v.ok) throw new Error(`${v.problems.join("\n")}\ncapture's last lines:\n${v.logs.join("\n")}`)
        }),
        { numRuns: RUNS_PER_SEED, seed, endOnFailure: true }
      )
    }
  })
})
