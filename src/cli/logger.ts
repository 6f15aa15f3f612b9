// The server's logger: one JSON line a decision on stdout, written 64 KiB at a time and at least
// every second, not one write per line. pino's default destination writes each line through
// libuv's thread pool: measured, ~13 µs of CPU a line against ~6 µs buffered (docs/benchmarks.md,
// "Cost per review"), on a path that logs every review. A line is at most a second late; what is
// left is written when the process exits.
//
// The lines are gathered here, in an array, and handed to the destination (sonic-boom) 64 KiB at a
// time. Each write goes through libuv's thread pool, ~30 µs of the event loop's time a write as
// measured on a 2-core machine (4 KiB at a time, that was 3 µs a decision), and its hand-off to a
// pool thread often wakes the other CPU. 64 KiB, Linux's default pipe capacity, a quarter of the
// writes that 16 KiB made: ~0.7 µs less a decision under load (docs/benchmarks.md, "Thirtieth
// pass"). A process killed without its exit hook loses at most that much, or a second of lines,
// whichever is less. And sonic-boom's own buffer measures the byte length of all it holds on
// every write (sonic-boom 4.2, `write`: Buffer.byteLength of its last chunk): a line buffered there
// cost ~2.2 µs, more than pino's formatting of it; gathered here, ~0.1 µs.
//
// A decision's line is formatted here too, not by pino: see decisionWriter.

import { openSync, writeSync } from 'node:fs'
import { pino, type DestinationStream, type Logger } from 'pino'
import type { DecisionLog } from '../server/app.ts'

export interface ServerLogger {
  readonly logger: Logger
  /** Writes a decision's line to the logger's destination, as `logger.info(line, 'review')` would. */
  readonly decisions: DecisionLog
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

const base = { service: 'servicecidr-guard' }

/**
 * The line `logger.info(line, 'review')` writes, byte for byte (a test compares them), with one
 * JSON.stringify of `line` instead of pino's formatting of each field in turn (pino 10,
 * `_asJson` in lib/tools.js): in a loop, 0.64-0.86 against 1.5-2.1 µs a line on a quiet machine
 * (docs/benchmarks.md, "Ninth pass"), on a path that writes one for every review. It holds only
 * for the options lineLogger gives pino: no serializers, formatters, mixin or redaction, the time
 * as epoch milliseconds, the message as `msg`.
 */
function decisionWriter(logger: Logger, destination: DestinationStream): DecisionLog {
  const bindings = JSON.stringify(base).slice(1, -1)
  return (line) => {
    if (!logger.isLevelEnabled('info')) return
    // 30 is info's number (pino.levels.values); a line always has a uid and a verdict, so its
    // JSON is never `{}`.
    destination.write(`{"level":30,"time":${String(Date.now())},${bindings},${JSON.stringify(line).slice(1, -1)},"msg":"review"}\n`)
  }
}

/** The server's pino logger, and its decision lines' writer, over one destination. */
export function lineLogger(level: string, destination: DestinationStream): { logger: Logger, decisions: DecisionLog } {
  const logger = pino({ level, base }, destination)
  return { logger, decisions: decisionWriter(logger, destination) }
}

/** `dest`: a file descriptor or path; 1 (stdout) in production, /dev/null in the benchmarks. */
export function serverLogger(level: string, dest: number | string = 1): ServerLogger {
  // A path is opened here, synchronously: the destination can then be written from the start,
  // and at exit.
  const fd = typeof dest === 'number' ? dest : openSync(dest, 'a')
  const destination = pino.destination({ dest: fd, sync: false })
  const lines = new LineBatch(destination, 65_536)
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
  const { logger, decisions } = lineLogger(level, lines)
  return {
    logger,
    decisions,
    close: () => {
      clearInterval(timer)
      flush()
    },
  }
}
