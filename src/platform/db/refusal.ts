// Why a process will not start: the database it was pointed at does not fit (settings, the
// app's tables, the publication, the secrets key). The message is for an operator or a DBA:
// what is wrong and the fix. The service and the CLIs print it plainly and exit 1.
import { Data } from "effect"

export class StartRefused extends Data.TaggedError("StartRefused")<{ readonly message: string }> {}

/** True for a StartRefused, also one that crossed a Promise boundary. */
export const isStartRefused = (e: unknown): e is StartRefused =>
  typeof e === "object" && e !== null && (e as { _tag?: unknown })._tag === "StartRefused"
