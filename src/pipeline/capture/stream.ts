// One replication connection (a new one per connect: the library cannot resume safely),
// with automatic acknowledgement and its timer off. Messages queue here; the reader pauses
// the socket when the queue is long, so a huge transaction never piles up in memory.
//
// A plain queue rather than an Effect Queue or Stream, kept on purpose: the library pushes
// from an event emitter that cannot wait, so a bounded queue's suspended offer gives no
// backpressure here (pausing the socket at a high-water mark does), and the batcher takes
// each message in a plain loop (batcher.ts), where an effect run per message would
// cost throughput. The run owns the stream through its scope (closed when the run ends).
import { LogicalReplicationService } from "pg-logical-replication"
import type { Message } from "pg-logical-replication/dist/output-plugins/pgoutput/pgoutput.types.js"
import { formatLsn, parseLsn, type Lsn } from "../../platform/db/lsn.ts"
import { RowPgoutputPlugin } from "./pgoutput.ts"

// Parsed messages are many small objects that outlive young-generation collections while
// they wait; past this many the socket pauses and the rest waits as bytes in the kernel.
const HIGH_WATER = 2000
const LOW_WATER = 500

export class ReplicationStream {
  private readonly service: LogicalReplicationService
  private readonly queue: Message[] = []
  private head = 0
  private waiter: (() => void) | null = null
  private failure: Error | null = null
  private paused = false
  private acknowledged: Lsn
  private closed = false
  readonly slot: string
  readonly publication: string
  /** Rejects once the stream fails or is closed (start() waits on it too). */
  private readonly failed: Promise<never>
  private rejectFailed: (e: Error) => void = () => {}

  /** Set by the consumer: true when every message taken so far is applied and stored. */
  idle: () => boolean = () => false

  /**
   * Answers a keepalive the server wants answered, `sent` being what it sent so far: by default
   * with what is acknowledged, or, when everything received is applied, with `sent` (the
   * consumer, run.ts, stores that first). Without the latter PostgreSQL cannot shut down: its
   * walsender waits for the client to confirm all it sent.
   */
  onKeepalive: (sent: Lsn) => void = (sent) =>
    void this.ack(this.idle() && sent > this.acknowledged ? sent : this.acknowledged)

  /** When the server last said anything (a message or a keepalive): capture's stall watch reads it. */
  lastReceivedAt = Date.now()

  constructor(url: string, slot: string, publication: string, start: Lsn) {
    this.slot = slot
    this.publication = publication
    this.acknowledged = start
    this.failed = new Promise<never>((_, reject) => (this.rejectFailed = reject))
    this.failed.catch(() => {})
    this.service = new LogicalReplicationService(
      { connectionString: url, application_name: "safety-records-capture" },
      { acknowledge: { auto: false, timeoutSeconds: 0 }, flowControl: { enabled: false } }
    )
    this.service.on("data", (_lsn: string, msg: Message) => {
      this.lastReceivedAt = Date.now()
      this.queue.push(msg)
      if (!this.paused && this.queue.length - this.head > HIGH_WATER) this.setPaused(true)
      this.wake()
    })
    this.service.on("heartbeat", (lsn: string, _ts: number, shouldRespond: boolean) => {
      this.lastReceivedAt = Date.now()
      if (!shouldRespond) return
      // Answer with what is durably stored (onKeepalive).
      this.onKeepalive(parseLsn(lsn))
    })
    this.service.on("error", (e: Error) => this.fail(e))
  }

  /** Starts streaming after `start` (the stored checkpoint). Resolves once started. */
  async start(start: Lsn): Promise<void> {
    const plugin = new RowPgoutputPlugin({ protoVersion: 1, publicationNames: [this.publication], messages: true })
    const started = new Promise<void>((resolve) => this.service.once("start", () => resolve()))
    const ended = this.service.subscribe(plugin, this.slot, formatLsn(start)).then(
      () => this.fail(new Error("replication stream ended")),
      (e: unknown) => this.fail(e instanceof Error ? e : new Error(String(e)))
    )
    void ended
    await Promise.race([started, this.failed])
  }

  /** Fails the stream: next() and start() reject with `e` (also how a failed write ends the loop). */
  fail(e: Error) {
    if (this.closed) return
    this.failure ??= e
    this.rejectFailed(this.failure)
    this.wake()
  }

  private wake() {
    const w = this.waiter
    this.waiter = null
    w?.()
  }

  private setPaused(paused: boolean) {
    this.paused = paused
    // @ts-expect-error the library keeps its pg connection private; its socket is what we pause.
    const stream = this.service._connection?.stream as { pause?: () => void; resume?: () => void } | undefined
    if (paused) stream?.pause?.()
    else stream?.resume?.()
  }

  /** Messages already received and not yet taken. */
  get pending(): number {
    return this.queue.length - this.head
  }

  /** The next message, waiting for one; rejects once the connection has failed. */
  async next(): Promise<Message> {
    for (;;) {
      if (this.head < this.queue.length) {
        const msg = this.queue[this.head]!
        this.queue[this.head++] = undefined as unknown as Message
        if (this.head > 4096 && this.head * 2 > this.queue.length) {
          this.queue.splice(0, this.head)
          this.head = 0
        }
        if (this.paused && this.pending < LOW_WATER) this.setPaused(false)
        return msg
      }
      if (this.failure) throw this.failure
      await new Promise<void>((resolve) => (this.waiter = resolve))
    }
  }

  /** Waits up to `ms` for a message to arrive; true if one is there. */
  async waitFor(ms: number): Promise<boolean> {
    if (this.pending > 0 || this.failure) return true
    await new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        this.waiter = null
        resolve()
      }, ms)
      this.waiter = () => {
        clearTimeout(t)
        resolve()
      }
    })
    return this.pending > 0 || this.failure !== null
  }

  /** Confirms everything up to `lsn` (a commit end LSN that is durably stored). */
  async ack(lsn: Lsn): Promise<void> {
    this.acknowledged = lsn
    if (lsn <= 0n || this.closed) return
    // The library reports lsn + 1; hand it lsn - 1 so the server hears exactly lsn.
    await this.service
      .acknowledge(formatLsn(lsn - 1n))
      .catch((e: unknown) => this.fail(e instanceof Error ? e : new Error(String(e))))
  }

  async close(): Promise<void> {
    // Once: a stalled run closes it before its cleanup would.
    if (this.closed) return
    this.failure ??= new Error("replication stream closed")
    this.rejectFailed(this.failure)
    this.closed = true
    this.wake()
    // On a dead connection pg's end() may never settle: drop the socket and move on.
    // @ts-expect-error private pg client of the library
    const socket = this.service._client?.connection?.stream as { destroy?: () => void } | undefined
    await Promise.race([this.service.destroy().catch(() => {}), new Promise((r) => setTimeout(r, 2000))])
    socket?.destroy?.()
  }
}
