// The server's logger: one JSON line a decision on stdout, written 16 KiB at a time and at least
// every second, not one write per line. pino's default destination writes each line through
// libuv's thread pool: measured, ~13 µs of CPU a line against ~6 µs buffered (docs/benchmarks.md,
// "Cost per review"), on a path that logs every review. A line is at most a second late; what is
// left is written when the process exits.
//
// The lines are gathered here, in an array, and handed to the destination (sonic-boom) 16 KiB at a
// time. Each write goes through libuv's thread pool, ~30 µs of the event loop's time a write as
// measured on a 2-core machine (4 KiB at a time, that was 3 µs a decision). And sonic-boom's own
// buffer measures the byte length of all it holds on every write (sonic-boom 4.2, `write`:
// Buffer.byteLength of its last chunk): a line buffered there cost ~2.2 µs, more than pino's
// formatting of it; gathered here, ~0.1 µs.

import { openSync, writeSync } from 'node:fs'
import { pino, type DestinationStream, type Logger } from 'pino'

export interface ServerLogger {
  readonly logger: Logger
  /** Stops the periodic flush and starts writing what is buffered (the rest is written at exit). */
  readonly close: () => void
}

/** Buffers whole lines and writes them to `destination` once `minLength` characters are held, or on flush(). */
export class LineBatch implements DestinationStream {
  private lines: string[] = []
  private length = 0
  private readonly destination: DestinationStream
  private readonly minLength: number

  constructor(destination: DestinationStream, minLength: number) {
    this.destination = destination
    this.minLength = minLength
  }

  write(line: string): void {
    this.lines.push(line)
    this.length += line.length
    if (this.length >= this.minLength) this.flush()
  }

  flush(): void {
    const text = this.take()
    if (text !== '') this.destination.write(text)
  }

  /** The lines held, as one text; they are no longer held. */
  take(): string {
    const text = this.lines.join('')
    this.lines = []
    this.length = 0
    return text
  }
}

/** `dest`: a file descriptor or path; 1 (stdout) in production, /dev/null in the benchmarks. */
export function serverLogger(level: string, dest: number | string = 1): ServerLogger {
  // A path is opened here, synchronously: the destination can then be written from the start,
  // and at exit.
  const fd = typeof dest === 'number' ? dest : openSync(dest, 'a')
  const destination = pino.destination({ dest: fd, sync: false })
  const lines = new LineBatch(destination, 16_384)
  const flush = (): void => {
    lines.flush()
    destination.flush()
  }
  // At exit the event loop no longer runs: what sonic-boom holds is written synchronously (pino
  // registers that itself), then what is held here, after it; not through destination.write, which
  // would start an asynchronous write that nothing waits for.
  const atExit = (): void => {
    const text = lines.take()
    if (text === '') return
    destination.flushSync()
    writeSync(fd, text)
  }
  const timer = setInterval(flush, 1000).unref()
  process.once('exit', atExit)
  const logger = pino({ level, base: { service: 'servicecidr-guard' } }, lines)
  return {
    logger,
    close: () => {
      clearInterval(timer)
      flush()
    },
  }
}
