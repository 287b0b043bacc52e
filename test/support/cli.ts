// Runs the real admin CLI (`node src/faces/cli/admin.ts`) as npm run admin does.
import { execFile } from "node:child_process"

export interface Run {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

export const runCli = (args: ReadonlyArray<string>, env: Record<string, string | undefined>): Promise<Run> =>
  new Promise((resolve) => {
    const merged: Record<string, string> = {}
    for (const [k, v] of Object.entries({ ...process.env, ...env })) if (v !== undefined) merged[k] = v
    execFile(
      process.execPath,
      ["src/faces/cli/admin.ts", ...args],
      { cwd: new URL("../../", import.meta.url).pathname, env: merged, timeout: 90_000 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === "number" ? error.code : 1
        resolve({ code, stdout, stderr })
      }
    )
  })
