// Notices when files change on disk. Kubernetes updates ConfigMap and Secret volumes by swapping a
// `..data` symlink, which inotify watches on the file path miss; comparing contents on a timer does
// not, and costs a few small reads every interval.

import { readFile } from 'node:fs/promises'

export interface FileWatch {
  stop(): void
}

/**
 * Calls `onChange` with the contents of `paths` whenever any of them differs from the last read.
 * The first read happens at once. A read error is passed on once, not at every poll while it lasts
 * (a file gone for a minute was 30 refusals counted and logged); the contents read after it are
 * passed on even if unchanged, for the caller to see the error is over.
 */
export function watchFiles(
  paths: readonly string[],
  intervalMs: number,
  onChange: (contents: Buffer[]) => void,
  onError: (error: unknown) => void,
): FileWatch {
  let last: string | undefined
  /** The read error last passed on, while it lasts. */
  let failing: string | undefined
  let busy = false
  const poll = async (): Promise<void> => {
    if (busy) return
    busy = true
    try {
      const contents = await Promise.all(paths.map((path) => readFile(path)))
      const signature = contents.map((content) => content.toString('base64')).join('\n')
      failing = undefined
      if (signature !== last) {
        last = signature
        onChange(contents)
      }
    } catch (error) {
      last = undefined
      const message = error instanceof Error ? error.message : String(error)
      if (message !== failing) {
        failing = message
        onError(error)
      }
    } finally {
      busy = false
    }
  }
  void poll()
  const timer = setInterval(() => {
    void poll()
  }, intervalMs)
  timer.unref()
  return {
    stop: () => {
      clearInterval(timer)
    },
  }
}
