// Each process says which release it runs (service.processes, sql/041): at start, every 15
// seconds under the supervisor, and gone at a clean stop. With it, whether the schema fence
// still lets it write (fence.ts): checked at each beat, logged once when that changes. `status`
// lists the processes seen within the last minute (docs/deployment.md#upgrades); a process
// killed leaves its row, which ages out of that list and is deleted after a day.
import { randomUUID } from "node:crypto"
import { hostname } from "node:os"
import { Effect, Layer, Schedule } from "effect"
import { ServiceRoles } from "./config.ts"
import { Database, type Tx } from "./db/Database.ts"
import { checkFence, type FenceVerdict } from "./db/fence.ts"
import { RELEASE } from "./release.ts"
import { currentSupervisor } from "./supervisor.ts"

const BEAT_MS = 15_000

/** A process as `status` lists it. */
export interface ProcessInfo {
  readonly release: string
  readonly generation: number
  readonly roles: ReadonlyArray<string>
  readonly host: string
  readonly pid: number
  readonly startedAt: string
  readonly seenAt: string
  readonly writable: boolean
  readonly fenceReason: string | null
}

const beat = async (sql: Tx, id: string, roles: ReadonlyArray<string>, verdict: FenceVerdict) => {
  await sql`
    insert into service.processes (id, release, generation, roles, host, pid, writable, fence_reason)
    values (${id}, ${RELEASE.version}, ${RELEASE.generation}, ${roles as string[]}, ${hostname()}, ${process.pid},
            ${verdict.writable}, ${verdict.reason})
    on conflict (id) do update set seen_at = now(), writable = excluded.writable, fence_reason = excluded.fence_reason`
}

/** The processes seen within the last minute, oldest release first. */
export const processesSeen = async (sql: Tx): Promise<ReadonlyArray<ProcessInfo>> => {
  try {
    const rows = await sql<
      {
        release: string
        generation: number
        roles: string[]
        host: string
        pid: number
        started_at: Date
        seen_at: Date
        writable: boolean
        fence_reason: string | null
      }[]
    >`
      select release, generation, roles, host, pid, started_at, seen_at, writable, fence_reason
        from service.processes where seen_at > now() - interval '1 minute'
       order by service.release_key(release), host, pid`
    return rows.map((r) => ({
      release: r.release,
      generation: r.generation,
      roles: r.roles,
      host: r.host,
      pid: r.pid,
      startedAt: r.started_at.toISOString(),
      seenAt: r.seen_at.toISOString(),
      writable: r.writable,
      fenceReason: r.fence_reason
    }))
  } catch (e) {
    // A database no release with the registry migrated yet: nothing to list.
    if ((e as { code?: string }).code === "42P01") return []
    throw e
  }
}

/** This process in the registry, beating under the supervisor until it stops. */
export const ProcessRegistryLive = Layer.effectDiscard(
  Effect.gen(function* () {
    const { sql } = yield* Database
    const roles = yield* ServiceRoles
    const id = randomUUID()
    let writable = true
    const once = Effect.tryPromise(async () => {
      const verdict = await checkFence(sql)
      await beat(sql, id, roles, verdict)
      return verdict
    }).pipe(
      Effect.tap((verdict) => {
        if (verdict.writable === writable) return Effect.void
        writable = verdict.writable
        return verdict.writable
          ? Effect.logInfo("schema fence: this process may write again")
          : Effect.logError("schema fence: this process may no longer write", { reason: verdict.reason })
      }),
      Effect.catchCause((cause) => Effect.logWarning("process registry: could not say which release runs here", cause))
    )
    yield* Effect.tryPromise(() => sql`delete from service.processes where seen_at < now() - interval '1 day'`).pipe(
      Effect.ignore
    )
    yield* once
    const supervisor = yield* currentSupervisor
    yield* supervisor.onStop(
      "process registry: gone",
      Effect.tryPromise(() => sql`delete from service.processes where id = ${id}`)
    )
    yield* supervisor.run("process registry", Effect.repeat(once, Schedule.spaced(BEAT_MS)))
  })
)
