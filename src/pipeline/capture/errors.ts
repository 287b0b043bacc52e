// Why a capture run ends. Each ends the run (the lock let go, the stream closed); the service
// retries with backoff, and a stall also says so in the log and in capture_state. The texts
// are what the log (`capture stopped; reconnecting`), /readyz's lastError and status show.
import { Data } from "effect"
import { isFenceRefusal } from "../../platform/db/fence.ts"
import { StartRefused } from "../../platform/db/refusal.ts"
import { CheckpointMoved } from "./checkpoint.ts"

/** The stream went quiet while WAL waited in the slot: the run reconnects. */
export class CaptureStalled extends Data.TaggedError("CaptureStalled")<{ readonly message: string }> {}

/** The leader lock's session failed or was replaced: another process may lead by now. */
export class LeaderLost extends Data.TaggedError("LeaderLost")<{ readonly message: string }> {}

/** The database did not answer the attempt to take the leader lock in time. */
export class LeaderLockUnreachable extends Data.TaggedError("LeaderLockUnreachable")<{ readonly message: string }> {}

/** The replication stream or a database call failed (a connection lost, a server restarted, ...). */
export class CaptureFailed extends Data.TaggedError("CaptureFailed")<{
  readonly message: string
  readonly cause?: unknown
}> {}

/**
 * The service's database takes writes only from a newer release (the schema fence: docs/
 * deployment.md#upgrades): this process writes nothing more and leaves capture to a newer one.
 */
export class CaptureFenced extends Data.TaggedError("CaptureFenced")<{ readonly message: string }> {}

/**
 * Everything a run can end with. CheckpointMoved: another process applied changes (this run's
 * batch wrote nothing). StartRefused: the publication does not publish what capture reads. A
 * lost slot is no failure: the run rebuilds the views and goes on (its error line says what was lost).
 */
export type CaptureError =
  | CaptureStalled
  | LeaderLost
  | LeaderLockUnreachable
  | CaptureFailed
  | CheckpointMoved
  | StartRefused
  | CaptureFenced

/** What a promise of the plain code rejected with, as a capture error. */
export const toCaptureError = (e: unknown): CaptureError =>
  isFenceRefusal(e)
    ? new CaptureFenced({ message: e instanceof Error ? e.message : "schema fence" })
    : e instanceof CaptureStalled ||
        e instanceof LeaderLost ||
        e instanceof LeaderLockUnreachable ||
        e instanceof CaptureFailed ||
        e instanceof CheckpointMoved ||
        e instanceof StartRefused ||
        e instanceof CaptureFenced
      ? e
      : new CaptureFailed({ message: e instanceof Error ? e.message : String(e), cause: e })
