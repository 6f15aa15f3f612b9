// Waiting by polling a condition, never by sleeping for a guessed time.

export interface PollOptions {
  readonly timeoutMs?: number
  readonly intervalMs?: number
}

/** Thrown by an attempt to stop polling at once: waiting longer cannot help. */
export class Fatal extends Error {}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Calls `attempt` until it returns a value other than undefined or false, and returns that value.
 * An attempt that throws counts as "not yet" (its message is kept for the timeout error), unless
 * it throws Fatal.
 */
export async function poll<T>(what: string, attempt: () => Promise<T | undefined | false> | T | undefined | false, options: PollOptions = {}): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 30_000
  const intervalMs = options.intervalMs ?? 200
  const deadline = Date.now() + timeoutMs
  let last = ''
  for (;;) {
    try {
      const value = await attempt()
      if (value !== undefined && value !== false) return value
    } catch (error) {
      if (error instanceof Fatal) throw error
      last = error instanceof Error ? error.message : String(error)
    }
    if (Date.now() >= deadline) {
      throw new Error(`timed out after ${(timeoutMs / 1000).toFixed(0)} s waiting for ${what}${last ? ` (last: ${last})` : ''}`)
    }
    await sleep(intervalMs)
  }
}
