// Where capture's time goes, by phase, for bench/capture: milliseconds summed over a run.
// A batch is prepared while the one before is written, and sent while that one still runs
// (it waits on the server for its commit), so the phases overlap.
export const PHASES = {
  stream: "waiting for the stream (nothing received yet)",
  decode: "row messages into changes (read as received)",
  prepare: "prepare: load, simulate, build statements",
  waiting: "waiting to prepare: the batch before last not yet committed",
  write: "write: the batch's database transaction (from sent)",
  begin: "  of which begin (a connection, BEGIN)",
  statements: "  of which statements (held for the batch before, run, answered)",
  commit: "  of which COMMIT (WAL flushed)"
} as const

export class CaptureProfile {
  readonly ms = new Map<string, number>()
  add(phase: string, ms: number): void {
    this.ms.set(phase, (this.ms.get(phase) ?? 0) + ms)
  }
}
