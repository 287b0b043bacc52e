// Requests that arrive together share one statement. Under load many requests are read in
// the same turn of the event loop; a statement each costs PostgreSQL a protocol exchange, a
// plan lookup and an executor start per request, and this process a socket write and a
// result per request. A batcher gathers what is asked during one turn and runs it as one
// statement when the turn ends (setImmediate), so a lone request waits for nothing and a
// busy process sends a few statements where it would send dozens.

export interface Batcher<A, B> {
  /** Adds one request to the current batch; settles with its own answer. */
  readonly load: (item: A) => Promise<B>
}

interface Waiting<A, B> {
  readonly item: A
  readonly resolve: (b: B) => void
  readonly reject: (e: unknown) => void
}

/**
 * `run` answers a batch in order: one answer per item, at the same index. When a batch of
 * several fails, each of its requests is run again alone, so that a request fails only for
 * its own reasons, as it would with a statement of its own.
 */
export const makeBatcher = <A, B>(
  run: (items: ReadonlyArray<A>) => Promise<ReadonlyArray<B>>,
  maxBatch: number
): Batcher<A, B> => {
  let waiting: Array<Waiting<A, B>> = []
  let scheduled: ReturnType<typeof setImmediate> | undefined

  const send = (batch: ReadonlyArray<Waiting<A, B>>) => {
    run(batch.map((w) => w.item)).then(
      (answers) => {
        for (let i = 0; i < batch.length; i++) batch[i]!.resolve(answers[i]!)
      },
      (error: unknown) => {
        if (batch.length === 1) batch[0]!.reject(error)
        else for (const w of batch) send([w])
      }
    )
  }

  const flush = () => {
    if (scheduled !== undefined) clearImmediate(scheduled)
    scheduled = undefined
    const batch = waiting
    waiting = []
    send(batch)
  }

  return {
    load: (item) =>
      new Promise<B>((resolve, reject) => {
        waiting.push({ item, resolve, reject })
        if (waiting.length >= maxBatch) flush()
        else if (scheduled === undefined) scheduled = setImmediate(flush)
      })
  }
}
