// How the engine fails. No step's failure stops the engine: a loop logs it and tries again
// (runtime.ts, `survive`); only options that cannot work stop it from starting.
import { Data } from "effect"

/** Which step a failed query belongs to, for the log line (`delivery <step> failed; retrying in 1 s`). */
export type EngineStep =
  | "fan-out"
  | "alerts"
  | "claim"
  | "next due"
  | "record"
  | "heartbeat"
  | "release"
  | "purge"
  | "leave"
  | "circuits"
  | "fence"

/** A database call of a step failed (a connection lost, a server restarting, a lock timeout, ...). */
export class DeliveryQueryFailed extends Data.TaggedError("DeliveryQueryFailed")<{
  readonly step: EngineStep
  readonly message: string
  readonly cause: unknown
}> {}

/** Options that cannot work together (a lease shorter than the attempts it covers): a defect, the engine does not start. */
export class EngineMisconfigured extends Data.TaggedError("EngineMisconfigured")<{ readonly message: string }> {}
