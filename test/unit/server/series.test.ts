// The review path's counters and histograms print exactly what prom-client's own would, for the
// same updates: Prometheus, dashboards and the e2e summary read them unchanged.

import t from 'tap'
import { Counter, Histogram, Registry } from 'prom-client'
import { FastCounter, FastHistogram } from '../../../src/server/series.ts'

const bounds = [0.00005, 0.0001, 0.00025, 0.001, 0.1]

/** The same metrics from prom-client, and from series.ts, each in a registry of its own. */
function pair(): { theirs: Registry, ours: Registry, update: (operation: string, outcome: string, seconds: number) => void } {
  const theirs = new Registry()
  const ours = new Registry()
  const counter = new Counter({ name: 'reviews_total', help: 'Reviews, by "operation" and outcome\\.', labelNames: ['operation', 'outcome'], registers: [theirs] })
  const histogram = new Histogram({ name: 'decision_seconds', help: 'Time.', labelNames: ['operation'], buckets: bounds, registers: [theirs] })
  const plain = new Histogram({ name: 'wait_seconds', help: 'Wait.', buckets: bounds, registers: [theirs] })
  const fastCounter = new FastCounter(ours, 'reviews_total', 'Reviews, by "operation" and outcome\\.', ['operation', 'outcome'])
  const fastHistogram = new FastHistogram(ours, 'decision_seconds', 'Time.', ['operation'], bounds)
  const fastPlain = new FastHistogram(ours, 'wait_seconds', 'Wait.', [], bounds)
  return {
    theirs,
    ours,
    update: (operation, outcome, seconds) => {
      counter.inc({ operation, outcome })
      fastCounter.inc({ operation, outcome })
      histogram.observe({ operation }, seconds)
      fastHistogram.observe({ operation }, seconds)
      plain.observe(seconds * 2)
      fastPlain.observe({}, seconds * 2)
    },
  }
}

t.test('before any update: labelled series absent, the unlabelled histogram at zero', async (t) => {
  const { theirs, ours } = pair()
  t.equal(await ours.metrics(), await theirs.metrics())
  t.match(await ours.metrics(), 'wait_seconds_count 0')
})

t.test('values on, between, below and above the bounds, in several series, print the same', async (t) => {
  const { theirs, ours, update } = pair()
  const values = [0, 0.00005, 0.00004999, 0.00005001, 0.0001, 0.0002, 0.00025, 0.001, 0.05, 0.1, 0.1000001, 3, 1e-9]
  const operations = ['CREATE', 'DELETE', 'UP"DATE\\']
  const outcomes = ['allowed', 'denied', 'error']
  values.forEach((seconds, i) => { update(operations[i % 3]!, outcomes[(i * 7) % 3]!, seconds) })
  const text = await ours.metrics()
  t.equal(text, await theirs.metrics())
  // Series listed in the order they were first used, not grouped by their first label.
  update('CREATE', 'denied', 0.001)
  t.equal(await ours.metrics(), await theirs.metrics(), 'a series first used later is listed later')
  // DELETE got 0.00005, 0.0001 and 0.001 (each on a bound) and 0.1000001 (just above the last).
  t.match(text, 'decision_seconds_bucket{le="0.00005",operation="DELETE"} 1', 'a value equal to a bound counts in that bound')
  t.match(text, 'decision_seconds_bucket{le="0.1",operation="DELETE"} 3', 'a value above every bound counts only in +Inf')
  t.match(text, 'decision_seconds_bucket{le="+Inf",operation="DELETE"} 4')
  t.match(text, 'UP\\"DATE\\\\', 'label values escaped')
})

t.test('a counter increment by more than one, and a reset', async (t) => {
  const theirs = new Registry()
  const ours = new Registry()
  const counter = new Counter({ name: 'writes_total', help: 'Writes.', labelNames: ['result'], registers: [theirs] })
  const fast = new FastCounter(ours, 'writes_total', 'Writes.', ['result'])
  counter.inc({ result: 'written' }, 3)
  fast.inc({ result: 'written' }, 3)
  t.equal(await ours.metrics(), await theirs.metrics())
  t.match(await ours.metrics(), 'writes_total{result="written"} 3')
  ours.resetMetrics()
  theirs.resetMetrics()
  t.equal(await ours.metrics(), await theirs.metrics())
  t.notMatch(await ours.metrics(), 'written')
})

t.test('an observation that is not a finite number is refused, as prom-client refuses it', (t) => {
  const fast = new FastHistogram(new Registry(), 'h', 'h', [], bounds)
  t.throws(() => { fast.observe({}, Number.NaN) }, /not a finite number/)
  t.throws(() => { fast.observe({}, Number.POSITIVE_INFINITY) }, /not a finite number/)
  t.end()
})
