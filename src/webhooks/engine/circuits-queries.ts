// Circuits' SQL (sql/024): a destination's circuit is a row while it is open or half open;
// closed, it has none. Every change notifies the engines (a trigger). Times that drive the
// probes are the engine's clock, passed in.
import type { Sql } from "postgres"

/** A destination: an endpoint or a subscription. */
export type Dest = { readonly endpointId: string | null; readonly subscriptionId: string | null }

export type CircuitRow = {
  readonly endpointId: string | null
  readonly subscriptionId: string | null
  readonly companyId: string
  readonly state: "open" | "half_open"
  readonly failures: number
  readonly openedAtMs: number
  readonly probeAtMs: number
  readonly probes: number
  readonly probeBy: string | null
  readonly probeUntilMs: number | null
  readonly lastError: string | null
}

type Raw = {
  endpoint_id: string | null
  subscription_id: string | null
  company_id: string
  state: "open" | "half_open"
  failures: number
  opened_at: Date
  probe_at: Date
  probes: number
  probe_by: string | null
  probe_until: Date | null
  last_error: string | null
}

const COLUMNS = `endpoint_id::text, subscription_id::text, company_id::text, state, failures, opened_at, probe_at, probes,
  probe_by::text, probe_until, last_error`

const row = (r: Raw): CircuitRow => ({
  endpointId: r.endpoint_id,
  subscriptionId: r.subscription_id,
  companyId: r.company_id,
  state: r.state,
  failures: r.failures,
  openedAtMs: r.opened_at.getTime(),
  probeAtMs: r.probe_at.getTime(),
  probes: r.probes,
  probeBy: r.probe_by,
  probeUntilMs: r.probe_until?.getTime() ?? null,
  lastError: r.last_error
})

const where = (d: Dest) => (d.endpointId !== null ? `endpoint_id = $1::uuid` : (`subscription_id = $1::uuid` as const))
const idOf = (d: Dest) => (d.endpointId ?? d.subscriptionId)!

// PostgreSQL text cannot hold NUL; errors quote receivers.
const clean = (s: string | null): string | null => (s === null ? null : s.replaceAll("\u0000", "\uFFFD").slice(0, 500))

/** Every circuit that is not closed. */
export const loadCircuits = async (sql: Sql): Promise<ReadonlyArray<CircuitRow>> =>
  (await sql.unsafe<Raw[]>(`select ${COLUMNS} from service.webhook_circuits`)).map(row)

/**
 * Opens the destination's circuit (unless another engine did first, or the destination is
 * gone: then nothing). Returns the circuit as it stands, or null when the destination is gone.
 */
export const openCircuit = async (
  sql: Sql,
  input: Dest & {
    readonly companyId: string
    readonly failures: number
    readonly nowMs: number
    readonly probeAtMs: number
    readonly lastError: string | null
  }
): Promise<{ readonly circuit: CircuitRow | null; readonly opened: boolean }> => {
  const inserted = await sql.unsafe<Raw[]>(
    `insert into service.webhook_circuits (endpoint_id, subscription_id, company_id, state, failures, opened_at, probe_at, last_error)
     select $1::uuid, $2::uuid, $3::uuid, 'open', $4, $5, $6, $7
     where exists (select 1 from service.webhook_endpoints where id = $1::uuid)
        or exists (select 1 from service.webhook_subscriptions where id = $2::uuid)
     on conflict do nothing
     returning ${COLUMNS}`,
    [
      input.endpointId,
      input.subscriptionId,
      input.companyId,
      input.failures,
      new Date(input.nowMs),
      new Date(input.probeAtMs),
      clean(input.lastError)
    ]
  )
  if (inserted.length > 0) return { circuit: row(inserted[0]!), opened: true }
  const [current] = await sql.unsafe<Raw[]>(`select ${COLUMNS} from service.webhook_circuits where ${where(input)}`, [
    idOf(input)
  ])
  return { circuit: current ? row(current) : null, opened: false }
}

/** Takes the single probe of an open circuit whose probe is due (or whose prober went quiet); false if another engine has it. */
export const claimProbe = async (
  sql: Sql,
  dest: Dest,
  owner: string,
  nowMs: number,
  untilMs: number
): Promise<boolean> => {
  const rows = await sql.unsafe(
    `update service.webhook_circuits set state = 'half_open', probe_by = $2::uuid, probe_until = $4
     where ${where(dest)} and probe_at <= $3 and (state = 'open' or probe_until <= $3)
     returning 1`,
    [idOf(dest), owner, new Date(nowMs), new Date(untilMs)]
  )
  return rows.length > 0
}

/** Closes the circuit (the receiver answered): true if it was open. */
export const closeCircuit = async (sql: Sql, dest: Dest): Promise<CircuitRow | null> => {
  const [r] = await sql.unsafe<Raw[]>(
    `delete from service.webhook_circuits where ${where(dest)} returning ${COLUMNS}`,
    [idOf(dest)]
  )
  return r ? row(r) : null
}

/**
 * The probe failed: open again, the next probe after `waitMs(probes)` from now, where probes
 * counts this failure too. Only the engine that holds the probe (or anyone once its lease ran out).
 */
export const reopenCircuit = async (
  sql: Sql,
  dest: Dest,
  input: {
    readonly owner: string
    readonly nowMs: number
    readonly baseMs: number
    readonly maxMs: number
    readonly lastError: string | null
  }
): Promise<CircuitRow | null> => {
  const [r] = await sql.unsafe<Raw[]>(
    `update service.webhook_circuits set state = 'open', probes = probes + 1, probe_by = null, probe_until = null,
       probe_at = $3::timestamptz + least($5::float8, $4::float8 * power(2, probes + 1)) * interval '1 millisecond',
       last_error = coalesce($6, last_error)
     where ${where(dest)} and (probe_by = $2::uuid or probe_by is null or probe_until <= $3)
     returning ${COLUMNS}`,
    [idOf(dest), input.owner, new Date(input.nowMs), input.baseMs, input.maxMs, clean(input.lastError)]
  )
  return r ? row(r) : null
}

/** Closes a destination's circuit whatever its state (Turn On, a new address): its receiver is to be tried afresh. */
export const resetCircuit = (dest: Dest) => ({
  text: `delete from service.webhook_circuits where ${where(dest)}`,
  params: [idOf(dest)]
})
