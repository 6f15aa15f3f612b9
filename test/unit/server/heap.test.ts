// collectStartupGarbage: one full collection, without --expose-gc on the command line.

import t from 'tap'
import { setImmediate as nextTurn } from 'node:timers/promises'
import { collectStartupGarbage } from '../../../src/server/heap.ts'

t.test('collects what nothing references any more, and says what it took', async (t) => {
  t.equal(typeof (globalThis as { gc?: unknown }).gc, 'undefined', 'this test runs without --expose-gc')
  const collected = new WeakRef(Array.from({ length: 2000 }, (_, i) => Array.from({ length: 1000 }, (_, j) => i + j)))
  // A WeakRef keeps its target alive until the turn it was made in ends.
  await nextTurn()
  const result = collectStartupGarbage()
  t.equal(collected.deref(), undefined, 'collected')
  t.ok(result.ms >= 0 && result.ms < 60_000, `took ${result.ms.toFixed(1)} ms`)
  t.ok(result.heapUsedAfter < result.heapUsedBefore, 'the heap in use shrank')
  t.equal(typeof (globalThis as { gc?: unknown }).gc, 'undefined', 'gc is not left on the global object')
})
