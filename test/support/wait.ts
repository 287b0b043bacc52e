// Polling, for what tests wait on: one waitFor for every test.

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/**
 * Polls (every `intervalMs`) until `check` returns a truthy value, which it returns; fails
 * naming `what` after `timeoutMs` (a function, to say what was seen by then).
 */
export const waitFor = async <A>(
  check: () => A | Promise<A>,
  what: string | (() => string),
  timeoutMs = 30_000,
  intervalMs = 20
): Promise<NonNullable<A>> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const v = await check()
    if (v) return v as NonNullable<A>
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${typeof what === "string" ? what : what()}`)
    await sleep(intervalMs)
  }
}
