// A destination's circuit as admins see it (sql/024, the engine's circuits.ts): closed, or
// open since when, the next probe from when, and the error that opened it.

export type CircuitState = "closed" | "open" | "half-open"

export type CircuitView = {
  /** closed: deliveries go; open: they are recorded as not sent until a probe gets an answer; half-open: the probe is on its way. */
  readonly state: CircuitState
  /** Timeouts or connection failures in a row that opened it; 0 when closed. */
  readonly failures: number
  readonly openedAt: string | null
  /** The next delivery due from then is sent as the probe. */
  readonly nextProbeAt: string | null
  /** Probes that got no answer since it opened. */
  readonly probes: number
  readonly lastError: string | null
}

export const CLOSED: CircuitView = {
  state: "closed",
  failures: 0,
  openedAt: null,
  nextProbeAt: null,
  probes: 0,
  lastError: null
}

const iso = (column: string) => `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`

/** A select-list column `circuit` (JSON, null when closed) for the destination whose id is `id` (an SQL expression). */
export const circuitColumn = (kind: "endpoint" | "subscription", id: string) =>
  `(select json_build_object('state', replace(c.state, '_', '-'), 'failures', c.failures, 'openedAt', ${iso("c.opened_at")},
     'nextProbeAt', ${iso("c.probe_at")}, 'probes', c.probes, 'lastError', c.last_error)
   from service.webhook_circuits c where c.${kind}_id = ${id}) as circuit`

/** The column's value as the view shows it. */
export const circuitView = (json: unknown): CircuitView => {
  if (json === null || json === undefined) return CLOSED
  const c = (typeof json === "string" ? JSON.parse(json) : json) as CircuitView
  return {
    state: c.state,
    failures: c.failures,
    openedAt: c.openedAt,
    nextProbeAt: c.nextProbeAt,
    probes: c.probes,
    lastError: c.lastError
  }
}
