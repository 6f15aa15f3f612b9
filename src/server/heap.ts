// One full garbage collection once the cache has first synced, before the replica reports ready.
//
// Suspected cause, and what was measured (docs/benchmarks.md, nineteenth and twentieth passes): the
// first list of a large cluster (100,000 IPAddresses: about 100 MiB of heap in use) begins an
// incremental marking that V8 ends later. When reviews are already arriving by then, V8's
// allocation-site pretenuring can see objects a review allocates survive, and from then on
// allocate them straight into the old generation, for the rest of the process: the review path's
// CPU doubles. In a loop of the bench's admitted CREATE with the Deployment's NODE_OPTIONS (a young
// generation of 2 x 8 MiB), 4 of 10 processes ran that way without this collection, 0 of 10 with
// it; without those NODE_OPTIONS, none either way. Collecting once, before any review, ends the
// start-up's marking while no review object is alive.

import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'

export interface Collected {
  readonly ms: number
  readonly heapUsedBefore: number
  readonly heapUsedAfter: number
}

/**
 * V8's full collection. Node exposes it only with --expose-gc; with the flag set now, a new
 * context gets `gc` (the main context's globals were made at start-up), and the flag is unset again
 * so that no later context does. Node warns that flags changed after start-up may behave
 * unpredictably (https://nodejs.org/api/v8.html#v8setflagsfromstringflags); this one only decides
 * whether a new context's global object has `gc`, and the unit test checks both ways.
 */
function fullCollection(): () => void {
  const exposed = (globalThis as { gc?: unknown }).gc
  if (typeof exposed === 'function') return exposed as () => void
  setFlagsFromString('--expose-gc')
  try {
    return runInNewContext('gc') as () => void
  } finally {
    setFlagsFromString('--no-expose-gc')
  }
}

/** Runs one full, non-incremental collection now, and says what it took. */
export function collectStartupGarbage(): Collected {
  const heapUsedBefore = process.memoryUsage().heapUsed
  const started = performance.now()
  fullCollection()()
  const ms = performance.now() - started
  return { ms, heapUsedBefore, heapUsedAfter: process.memoryUsage().heapUsed }
}
