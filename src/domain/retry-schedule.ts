// WEBHOOK_RETRY_SCHEDULE: the waits between attempts, e.g. "15m,1h,4h,12h,1d" (docs/events.md#retries):
// an attempt at once, then one after each wait, so five waits make six attempts.

const UNITS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }

export const DEFAULT_RETRY_SCHEDULE = "15m,1h,4h,12h,1d"

export type RetrySchedule = {
  /** Milliseconds to wait after attempt n (1-based) fails, at index n - 1. */
  readonly delaysMs: ReadonlyArray<number>
  /** Attempts in all: the first, then one per wait. */
  readonly maxAttempts: number
  readonly text: string
}

export type ParseScheduleResult =
  | { readonly ok: true; readonly schedule: RetrySchedule }
  | { readonly ok: false; readonly error: string }

const MAX_WAIT_MS = 30 * 86_400_000 // beyond the 30 days deliveries are kept

/** Parses "15m,1h,..." (units ms, s, m, h, d; whole or decimal numbers). An empty text means one attempt only. */
export const parseRetrySchedule = (text: string): ParseScheduleResult => {
  const delaysMs: Array<number> = []
  const trimmed = text.trim()
  if (trimmed !== "") {
    for (const raw of trimmed.split(",")) {
      const part = raw.trim()
      const m = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)$/.exec(part)
      if (!m)
        return { ok: false, error: `WEBHOOK_RETRY_SCHEDULE: "${part}" is not a wait like 100ms, 30s, 15m, 1h or 1d` }
      const ms = Math.round(Number(m[1]) * UNITS[m[2]!]!)
      if (ms > MAX_WAIT_MS) return { ok: false, error: `WEBHOOK_RETRY_SCHEDULE: "${part}" is longer than 30 days` }
      delaysMs.push(ms)
    }
  }
  if (delaysMs.length > 20) return { ok: false, error: "WEBHOOK_RETRY_SCHEDULE: at most 20 waits" }
  return { ok: true, schedule: { delaysMs, maxAttempts: delaysMs.length + 1, text: trimmed } }
}

export const parseRetryScheduleOrThrow = (text: string): RetrySchedule => {
  const r = parseRetrySchedule(text)
  if (!r.ok) throw new Error(r.error)
  return r.schedule
}

/** The wait after attempt `number` failed, or null when it was the last one. */
export const delayAfter = (schedule: RetrySchedule, number: number): number | null =>
  number >= 1 && number < schedule.maxAttempts ? schedule.delaysMs[number - 1]! : null
