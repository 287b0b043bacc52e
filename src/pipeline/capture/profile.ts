// Where capture's time goes, by phase, for bench/capture: milliseconds summed over a run.
// A batch is prepared while the one before is written, so the phases overlap.
export const PHASES = {
  stream: "waiting for the stream (nothing received yet)",
  decode: "row messages into changes (read as received)",
  prepare: "prepare: load, simulate, build statements",
  waiting: "prepared, waiting for the batch before to commit",
  write: "write: the batch's database transaction",
  begin: "  of which begin (a connection, BEGIN)",
  statements: "  of which statements (sent, run, answered)",
  commit: "  of which COMMIT (WAL flushed)"
} as const

export class CaptureProfile {
  readonly ms = new Map<string, number>()
  add(phase: string, ms: number): void {
    this.ms.set(phase, (this.ms.get(phase) ?? 0) + ms)
  }
}
