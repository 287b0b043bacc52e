// A progress bar on stderr when it is a terminal; nothing otherwise (scripts read the
// summary on stdout). Redrawn at most ten times a second.

export interface Progress {
  readonly update: (done: number, total: number, label?: string) => void
  readonly done: () => void
}

const WIDTH = 30

export const renderBar = (label: string, done: number, total: number): string => {
  const share = total > 0 ? Math.min(1, done / total) : 0
  const filled = Math.round(share * WIDTH)
  return `${label} [${"#".repeat(filled)}${"-".repeat(WIDTH - filled)}] ${String(Math.floor(share * 100)).padStart(3)}% ${done}/${total}`
}

export const progressBar = (label: string, stream: NodeJS.WriteStream = process.stderr): Progress => {
  if (!stream.isTTY) return { update: () => {}, done: () => {} }
  let last = 0
  let shown = false
  return {
    update: (done, total, phase) => {
      const now = Date.now()
      if (now - last < 100 && done < total) return
      last = now
      shown = true
      stream.write(`\r\x1b[2K${renderBar(phase ?? label, done, total)}`)
    },
    done: () => {
      if (shown) stream.write("\r\x1b[2K")
    }
  }
}
