// The service as users run it: `node src/main.ts` (or the bundle `npm start` runs) in a child process, with what it prints,
// its exit, and polling of its HTTP endpoints. One helper for every test that starts it.
import { spawn, type ChildProcess } from "node:child_process"
import { fileURLToPath } from "node:url"
import { waitFor } from "./wait.ts"

export const MAIN = fileURLToPath(new URL("../../src/main.ts", import.meta.url))

export interface ServiceProcess {
  readonly child: ChildProcess
  /** Everything printed, stdout and stderr as they came. */
  readonly output: () => string
  readonly stdout: () => string
  readonly stderr: () => string
  /** The exit code; rejects with what the process printed if it has not exited within `ms`. */
  readonly exited: (ms?: number) => Promise<number | null>
  /** The operations port's base URL, once the service has logged it (within `ms`). */
  readonly opsUrl: (ms?: number) => Promise<string>
}

/** The operations port's address in a service's log ("Operations on http://..."), once it is there. */
export const opsUrlIn = (output: () => string, ms = 60_000): Promise<string> =>
  waitFor(
    () => /"message":"Operations on (http:\/\/[^"]+)"/.exec(output())?.[1],
    "the operations port's address",
    ms,
    50
  )

/** `main`: the file to run, src/main.ts unless given (e.g. the bundle `npm start` builds). */
export const startService = (
  env: Record<string, string | undefined>,
  options: { readonly main?: string } = {}
): ServiceProcess => {
  const child = spawn(process.execPath, [options.main ?? MAIN], {
    // Any free operations port, unless the test names one: the log says which (opsUrl).
    env: { ...process.env, LOG_LEVEL: "Info", OPS_PORT: "0", ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  let stdout = ""
  let stderr = ""
  child.stdout!.on("data", (d) => {
    output += d
    stdout += d
  })
  child.stderr!.on("data", (d) => {
    output += d
    stderr += d
  })
  const exit = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  const exited = (ms = 40_000) =>
    Promise.race([
      exit,
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error(`no exit within ${ms} ms; output:\n${output.slice(-4000)}`)), ms)
      )
    ])
  return {
    child,
    output: () => output,
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    opsUrl: (ms?: number) => opsUrlIn(() => output, ms)
  }
}

export type Readiness = {
  readonly status?: string
  readonly capture?: { readonly role?: string; readonly streaming?: boolean }
}

/** readyz with capture streaming: this process leads and follows the slot. */
export const streaming = (body: Readiness) => body.capture?.streaming === true

/** Polls until the URL answers 200 (and, when given, its JSON body passes `check`); returns the body. */
export const waitForUrl = async <B = Readiness>(
  url: string,
  ms: number,
  check: (body: B) => boolean = () => true
): Promise<B> => {
  // The last answer (or failure), for the message should it never pass.
  let last = "no answer"
  const answered = await waitFor(
    async () => {
      try {
        const r = await fetch(url, { signal: AbortSignal.timeout(3000) })
        const text = await r.text()
        last = `${r.status} ${text.slice(0, 1000)}`
        if (r.ok) {
          const body = JSON.parse(text) as B
          if (check(body)) return { body }
        }
      } catch (e) {
        last = `no answer: ${(e as Error).message}` // not up yet
      }
      return undefined
    },
    () => `${url} to answer within ${ms} ms (last: ${last})`,
    ms,
    100
  )
  return answered.body
}
