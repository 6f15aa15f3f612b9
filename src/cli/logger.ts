// The server's logger: one JSON line a decision on stdout, written a few KiB at a time and at
// least every second, not one write per line. pino's default destination writes each line through
// libuv's thread pool: measured, ~13 µs of CPU a line against ~6 µs buffered (docs/benchmarks.md,
// "Cost per review"), on a path that logs every review. A line is at most a second late; pino
// flushes what is left when the process exits.

import { pino, type Logger } from 'pino'

export interface ServerLogger {
  readonly logger: Logger
  /** Stops the periodic flush and starts writing what is buffered (pino writes the rest at exit). */
  readonly close: () => void
}

/** `dest`: a file descriptor or path; 1 (stdout) in production, /dev/null in the benchmarks. */
export function serverLogger(level: string, dest: number | string = 1): ServerLogger {
  const destination = pino.destination({ dest, sync: false, minLength: 4096 })
  const timer = setInterval(() => { destination.flush() }, 1000).unref()
  const logger = pino({ level, base: { service: 'servicecidr-guard' } }, destination)
  return {
    logger,
    close: () => {
      clearInterval(timer)
      destination.flush()
    },
  }
}
