// The policy in force, reloaded when its file changes. A new file that does not validate is
// refused: the last good policy stays in force, and the error is reported until a good one comes.

import type { Policy } from '../policy/types.ts'
import { watchFiles, type FileWatch } from './file-watch.ts'
import { parsePolicy } from './policy.ts'

export interface PolicyStatus {
  readonly source: string
  /** When the policy in force was loaded (ms since the epoch). */
  readonly loadedAt: number
  readonly reloads: number
  readonly reloadErrors: number
  /** Why the newest file was refused; undefined when the file on disk is the policy in force. */
  readonly lastError: string | undefined
}

export interface PolicySourceEvents {
  onLoad(policy: Policy, first: boolean): void
  onError(message: string): void
  /** The file is again the policy in force, after an error: nothing is reloaded. */
  onRestored?(): void
}

export class PolicySource {
  private current: Policy | undefined
  /** The file's text as the policy in force was read from it. */
  private text: string | undefined
  private watch: FileWatch | undefined
  private status: PolicyStatus
  readonly path: string

  private constructor(path: string, now: number) {
    this.path = path
    this.status = { source: path, loadedAt: now, reloads: 0, reloadErrors: 0, lastError: undefined }
  }

  /** Loads the file once (throwing PolicyError or a read error), then watches it. */
  static async open(path: string, intervalMs: number, events: PolicySourceEvents, now: () => number = Date.now): Promise<PolicySource> {
    const source = new PolicySource(path, now())
    await new Promise<void>((resolve, reject) => {
      source.watch = watchFiles([path], intervalMs, ([content]) => {
        const first = source.current === undefined
        const text = content?.toString('utf8') ?? ''
        // The file read again after an error (it could not be read, or held a refused policy) is the
        // policy in force: the error is over, and nothing was reloaded.
        if (text === source.text) {
          source.status = { ...source.status, lastError: undefined }
          events.onRestored?.()
          return
        }
        try {
          const policy = parsePolicy(text, path)
          source.current = policy
          source.text = text
          source.status = { ...source.status, loadedAt: now(), reloads: source.status.reloads + (first ? 0 : 1), lastError: undefined }
          events.onLoad(policy, first)
          if (first) resolve()
        } catch (error) {
          const message = error instanceof Error ? error.message : String(error)
          if (first) {
            source.stop()
            reject(error instanceof Error ? error : new Error(message))
            return
          }
          source.status = { ...source.status, reloadErrors: source.status.reloadErrors + 1, lastError: message }
          events.onError(message)
        }
      }, (error) => {
        const message = `cannot read ${path}: ${error instanceof Error ? error.message : String(error)}`
        if (source.current === undefined) {
          source.stop()
          reject(new Error(message))
          return
        }
        source.status = { ...source.status, reloadErrors: source.status.reloadErrors + 1, lastError: message }
        events.onError(message)
      })
    })
    return source
  }

  get policy(): Policy {
    if (this.current === undefined) throw new Error('policy read before it was loaded')
    return this.current
  }

  get health(): PolicyStatus {
    return this.status
  }

  stop(): void {
    this.watch?.stop()
  }
}
