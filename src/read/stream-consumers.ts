// Consumers: positions in the stream that the service keeps for a key (PUT /api/v1/consumers/<name>,
// docs/integrators.md#server-kept-positions), as Sequin's consumers and Svix's polling endpoints
// keep an iterator. A consumer's stream answers from its acknowledged position; an ack moves it
// forward only, and only to an offset the service served it. At most 20 per key; a key sees only
// its own (every statement is by key id).
import type postgres from "postgres"
import { conflict, invalid, notFound, type Conflict, type Invalid, type NotFound } from "../domain/errors.ts"
import { isResource, type Resource } from "../domain/resources.ts"
import { comparePlaces, type Offset } from "./stream-offset.ts"

export const MAX_CONSUMERS = 20
export const CONSUMER_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/

export interface Consumer {
  readonly name: string
  readonly resources: ReadonlyArray<Resource> | null
  /** The acknowledged offset; null: from the oldest change kept. */
  readonly position: string | null
  readonly createdAt: string
  readonly updatedAt: string
}

interface ConsumerRow {
  readonly name: string
  readonly resources: ReadonlyArray<string> | null
  readonly position: string | null
  readonly served: string | null
  readonly created_at: Date
  readonly updated_at: Date
}

const shown = (r: ConsumerRow): Consumer => ({
  name: r.name,
  resources: r.resources as ReadonlyArray<Resource> | null,
  position: r.position,
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString()
})

export const checkName = (name: string): Invalid | undefined =>
  CONSUMER_NAME.test(name)
    ? undefined
    : invalid(
        "a consumer's name is 1 to 64 letters, digits, dots, hyphens and underscores, starting with a letter or digit",
        { field: "name" }
      )

/** The stream a consumer's offsets belong to. */
export const consumerSpec = (name: string) => `consumer:${name}`

/** The resources as the consumer keeps them: sorted, no repeats; each a resource. */
export const normalResources = (
  resources: ReadonlyArray<string> | undefined | null
): ReadonlyArray<Resource> | null | Invalid => {
  if (resources === undefined || resources === null) return null
  for (const r of resources)
    if (!isResource(r)) return invalid(`resources: ${JSON.stringify(r)} is not a resource`, { field: "resources" })
  if (resources.length === 0)
    return invalid("resources: name at least one resource, or leave it out for every one the key may read", {
      field: "resources"
    })
  return [...new Set(resources as ReadonlyArray<Resource>)].sort()
}

export const getConsumer = async (
  sql: postgres.Sql,
  keyId: string,
  name: string
): Promise<(Consumer & { readonly served: string | null }) | undefined> => {
  const [r] = await sql<
    ConsumerRow[]
  >`select * from service.stream_consumers where key_id = ${keyId} and name = ${name}`
  return r === undefined ? undefined : { ...shown(r), served: r.served }
}

export const listConsumers = async (sql: postgres.Sql, keyId: string): Promise<ReadonlyArray<Consumer>> =>
  (await sql<ConsumerRow[]>`select * from service.stream_consumers where key_id = ${keyId} order by name`).map(shown)

/**
 * Creates or changes a consumer. `position` is where it starts (an offset of this consumer, or
 * null for the oldest change kept); left out, an existing consumer keeps its place when its
 * resources stay the same, and starts again at `present` otherwise (a new consumer too).
 */
export const putConsumer = async (
  sql: postgres.Sql,
  keyId: string,
  name: string,
  resources: ReadonlyArray<Resource> | null,
  position: { readonly set: string | null } | undefined,
  present: () => Promise<string>
): Promise<{ readonly consumer: Consumer; readonly created: boolean } | Conflict> => {
  const start = position ?? null
  return sql.begin(async (tx) => {
    // One key's consumers change one at a time: the count stays within the bound.
    await tx`select 1 from service.api_keys where id = ${keyId} for update`
    const [old] = await tx<
      ConsumerRow[]
    >`select * from service.stream_consumers where key_id = ${keyId} and name = ${name}`
    if (old === undefined) {
      const [c] = await tx<
        { n: number }[]
      >`select count(*)::int as n from service.stream_consumers where key_id = ${keyId}`
      if (c!.n >= MAX_CONSUMERS) return conflict(`a key has at most ${MAX_CONSUMERS} consumers; delete one first`)
    }
    const same = old !== undefined && JSON.stringify(old.resources) === JSON.stringify(resources)
    const at = start !== null ? start.set : same ? old!.position : await present()
    const served = start !== null ? start.set : same ? old!.served : at
    const [r] = await tx<ConsumerRow[]>`
      insert into service.stream_consumers (key_id, name, resources, position, served)
      values (${keyId}, ${name}, ${resources as string[] | null}, ${at}, ${served})
      on conflict (key_id, name) do update set resources = excluded.resources, position = excluded.position,
        served = excluded.served, updated_at = now()
      returning *`
    return { consumer: shown(r!), created: old === undefined }
  }) as Promise<{ readonly consumer: Consumer; readonly created: boolean } | Conflict>
}

export const deleteConsumer = async (sql: postgres.Sql, keyId: string, name: string): Promise<boolean> =>
  (await sql`delete from service.stream_consumers where key_id = ${keyId} and name = ${name} returning 1`).length > 0

/**
 * Records what a consumer's stream answered: its furthest served offset moves forward only (two
 * reads of the same consumer at once may finish in either order).
 */
export const noteServed = async (
  sql: postgres.Sql,
  keyId: string,
  name: string,
  offset: Offset,
  text: string,
  decode: (text: string) => Offset | { readonly error: string }
) => {
  await sql.begin(async (tx) => {
    const [r] = await tx<{ served: string | null }[]>`
      select served from service.stream_consumers where key_id = ${keyId} and name = ${name} for update`
    if (r === undefined) return
    const was = r.served === null ? undefined : decode(r.served)
    if (was !== undefined && !("error" in was) && comparePlaces(offset, was) <= 0) return
    await tx`update service.stream_consumers set served = ${text} where key_id = ${keyId} and name = ${name}`
  })
}

/**
 * Moves a consumer's position to `offset` (decoded): never backwards (an older one leaves it
 * where it is), never past what it was served (400).
 */
export const ackConsumer = async (
  sql: postgres.Sql,
  keyId: string,
  name: string,
  text: string,
  offset: Offset,
  decode: (text: string) => Offset | { readonly error: string }
): Promise<Consumer | Invalid | NotFound> =>
  sql.begin(async (tx) => {
    const [r] = await tx<
      ConsumerRow[]
    >`select * from service.stream_consumers where key_id = ${keyId} and name = ${name} for update`
    if (r === undefined) return notFound(`no consumer named ${name} of this key`)
    const served = r.served === null ? undefined : decode(r.served)
    if (served === undefined || "error" in served || comparePlaces(offset, served) > 0)
      return invalid("offset: this consumer was never served that offset; acknowledge an offset its stream answered", {
        field: "offset"
      })
    const position = r.position === null ? undefined : decode(r.position)
    if (position !== undefined && !("error" in position) && comparePlaces(offset, position) <= 0) return shown(r)
    const [u] = await tx<ConsumerRow[]>`
      update service.stream_consumers set position = ${text}, updated_at = now()
       where key_id = ${keyId} and name = ${name} returning *`
    return shown(u!)
  }) as Promise<Consumer | Invalid | NotFound>
