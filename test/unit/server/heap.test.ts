// collectStartupGarbage: one full collection, without --expose-gc on the command line.

import t from 'tap'
import { setImmediate as nextTurn } from 'node:timers/promises'
import { runInNewContext } from 'node:vm'
import { collectStartupGarbage } from '../../../src/server/heap.ts'

t.test('collects what nothing references any more, old generation included, and says what it took', async (t) => {
  t.equal(typeof (globalThis as { gc?: unknown }).gc, 'undefined', 'this test runs without --expose-gc')
  const collected = new WeakRef(Array.from({ length: 2000 }, (_, i) => Array.from({ length: 100 }, (_, j) => i + j)))
  // A WeakRef keeps its target alive until the turn it was made in ends. 256 MiB allocated and
  // dropped before then: scavenges enough to move it to the old generation, which a scavenge does
  // not collect; only a full collection does.
  for (let i = 0; i < 256; i++) new Float64Array(131_072).fill(i)
  await nextTurn()
  const result = collectStartupGarbage()
  t.equal(collected.deref(), undefined, 'collected')
  t.ok(result.ms >= 0 && result.ms < 60_000, `took ${result.ms.toFixed(1)} ms`)
  t.ok(result.heapUsedAfter < result.heapUsedBefore, 'the heap in use shrank')
  t.equal(runInNewContext('typeof gc'), 'undefined', 'a context made afterwards has no gc')
})
