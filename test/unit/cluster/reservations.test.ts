// The shared reservation protocol against an in-memory Lease that enforces resourceVersion
// preconditions as kube-apiserver does: one write per version, re-read and decide again on a
// conflict, a bound on attempts, a deadline, expiry, and failing closed with a reason.

import { setTimeout as delay } from 'node:timers/promises'
import fc from 'fast-check'
import t from 'tap'
import { formatReservations, isoTime, maxAnnotationBytes, parseReservations, SharedReservations, type Reservation, type ReserveResult, type SharedReservationsOptions } from '../../../src/cluster/reservations.ts'
import { StoreError } from '../../../src/cluster/lease.ts'
import { MemoryLeaseStore } from '../../support/lease-store.ts'
import { serviceCIDR } from '../../support/fixtures.ts'
import { fuzzParameters } from '../../support/fuzz.ts'

const start = Date.parse('2026-12-01T10:00:00Z')
const ttlMs = 10_000

interface Rig {
  store: MemoryLeaseStore
  reservations: SharedReservations
  clock: { now: number }
  settled: string[]
  writes: string[]
  expired: number[]
  warnings: string[]
}

function rig(store = new MemoryLeaseStore(), options: Partial<SharedReservationsOptions> = {}): Rig {
  const clock = { now: start }
  const settled: string[] = []
  const writes: string[] = []
  const expired: number[] = []
  const warnings: string[] = []
  const reservations = new SharedReservations({
    store,
    replica: 'replica-1',
    ttlMs,
    deadlineMs: 1000,
    now: () => clock.now,
    log: { warn: (_object, message) => { warnings.push(message) } },
    events: {
      settled: (outcome) => { settled.push(outcome) },
      write: (result) => { writes.push(result) },
      expiredUnseen: (count) => { expired.push(count) },
    },
    ...options,
  })
  return { store, reservations, clock, settled, writes, expired, warnings }
}

const always = (): boolean => true
const request = (name: string, cidrs: string[], uid = `uid-${name}`): { name: string, cidrs: string[], uid: string } => ({ name, cidrs, uid })
const entry = (name: string, cidrs: string[], expiresAt: number, replica = 'replica-2'): Reservation => ({ name, cidrs, expiresAt, replica, uid: `uid-${name}` })
const held = (store: MemoryLeaseStore): Reservation[] => parseReservations(store.annotation).entries

// Other replicas read the expiry back with Date.parse: it must be toISOString's text, to the millisecond.
t.test('an expiry is written as toISOString writes it, within a second and across seconds', (t) => {
  const edges = [0, 1, 9, 10, 99, 100, 999, 1000, 1001, -1, -999, -1000, -1001, start, start + 999, start + 1000, 8.64e15, -8.64e15, 253402300800000, -62167219200001]
  for (const ms of edges) t.equal(isoTime(ms), new Date(ms).toISOString(), String(ms))
  fc.assert(fc.property(fc.integer({ min: -8.64e15, max: 8.64e15 }), fc.integer({ min: 0, max: 2500 }), (ms, later) =>
    isoTime(ms) === new Date(ms).toISOString() && (ms + later > 8.64e15 || isoTime(ms + later) === new Date(ms + later).toISOString())), fuzzParameters(2000))
  t.throws(() => isoTime(Number.NaN), RangeError, 'not a time, as toISOString')
  t.throws(() => isoTime(8.64e15 + 1), RangeError, 'beyond the range, as toISOString')
  t.end()
})

t.test('a lone writer: one GET, then one PUT per reservation, each checked against the version it writes', async (t) => {
  const { store, reservations, writes, settled } = rig()
  t.same(await reservations.reserve(request('a', ['10.0.0.0/24']), always), { outcome: 'recorded' })
  t.same(await reservations.reserve(request('b', ['10.0.1.0/24']), always), { outcome: 'recorded' })
  t.equal(store.gets, 1, 'read once; after that the Lease this replica wrote is the one it checks against')
  t.equal(store.updates, 2, 'one PUT per reservation')
  t.same(writes, ['written', 'written'])
  t.same(settled, ['recorded', 'recorded'])
  t.same(held(store), [entry('a', ['10.0.0.0/24'], start + ttlMs, 'replica-1'), entry('b', ['10.0.1.0/24'], start + ttlMs, 'replica-1')], 'name, CIDRs, expiry (now + TTL), replica and uid')
  t.same((JSON.parse(store.annotation ?? '') as unknown[])[0], { name: 'a', cidrs: ['10.0.0.0/24'], expires: '2026-12-01T10:00:10.000Z', replica: 'replica-1', uid: 'uid-a' }, 'the annotation as people read it')
})

t.test('the recheck sees what the Lease holds, expired entries left out; a refused request writes nothing', async (t) => {
  const store = new MemoryLeaseStore({ annotation: formatReservations([entry('live', ['10.0.0.0/24'], start + 1), entry('gone', ['10.0.1.0/24'], start)]) })
  const { reservations, settled } = rig(store)
  const seen: string[][] = []
  const result = await reservations.reserve(request('b', ['10.0.0.0/25']), (entries) => {
    seen.push(entries.map((item) => item.name))
    return !entries.some((item) => item.name === 'live')
  })
  t.same(result, { outcome: 'refused' })
  t.same(seen, [['live']], 'an entry expiring exactly now is expired')
  t.equal(store.updates, 0, 'nothing written')
  t.same(settled, ['refused'])
})

t.test('conflict: another replica wrote since the Lease was read; read again and decide again with its entry', async (t) => {
  const { store, reservations, writes } = rig()
  await reservations.reserve(request('a', ['10.0.0.0/24']), always)
  // replica-2 records an overlapping range; this replica's copy of the Lease is now stale.
  store.overwrite(formatReservations([...held(store), entry('other', ['10.0.2.0/24'], start + ttlMs)]))
  const calls: string[][] = []
  const result = await reservations.reserve(request('mine', ['10.0.2.0/25']), (entries) => {
    calls.push(entries.map((item) => item.name))
    return !entries.some((item) => item.name === 'other')
  })
  t.same(result, { outcome: 'refused' }, 'refused once the other replica\'s entry is seen')
  t.same(calls, [['a'], ['a', 'other']], 'decided against the stale copy, then again against the version read after the 409')
  t.equal(store.conflicts, 1)
  t.same(writes, ['written', 'conflict'])
  t.equal(store.gets, 2)
})

t.test('conflict with a write that does not overlap: recorded on the retry, both entries kept', async (t) => {
  const { store, reservations } = rig()
  await reservations.reserve(request('a', ['10.0.0.0/24']), always)
  store.overwrite(formatReservations([...held(store), entry('other', ['10.9.0.0/24'], start + ttlMs)]))
  t.same(await reservations.reserve(request('b', ['10.0.1.0/24']), always), { outcome: 'recorded' })
  t.same(held(store).map((item) => item.name), ['a', 'other', 'b'])
  t.equal(store.conflicts, 1)
})

t.test('conflicts beyond the bound fail closed, with the reason', async (t) => {
  const store = new MemoryLeaseStore()
  store.beforeUpdate = () => { store.overwrite('[]') }
  const { reservations, settled } = rig(store, { maxAttempts: 3 })
  const result = await reservations.reserve(request('a', ['10.0.0.0/24']), always)
  t.same(result, { outcome: 'failed', reason: 'conflicts', detail: 'the Lease servicecidr-guard-system/servicecidr-guard-reservations changed under it 3 times in a row (other replicas writing)' })
  t.equal(store.updates, 3, 'three attempts')
  t.same(settled, ['conflicts'])
  t.match(reservations.lastError, /changed under it 3 times/)
})

t.test('expiry: the next write prunes expired entries; until then they count', async (t) => {
  const store = new MemoryLeaseStore({ annotation: formatReservations([entry('old', ['10.0.0.0/24'], start + 5), entry('young', ['10.0.1.0/24'], start + 5000)]) })
  const { reservations, clock } = rig(store)
  clock.now = start + 10
  await reservations.reserve(request('new', ['10.0.2.0/24']), always)
  t.same(held(store).map((item) => item.name), ['young', 'new'], 'the expired entry is gone, the live one stays')
})

t.test('an entry leaves the Lease only by expiry, even once the watch has shown its ServiceCIDR', async (t) => {
  // A replica whose watch lags must still see the entry: removing it when the first replica's
  // watch shows the object would let the lagging one admit an overlapping range.
  const { store, reservations, clock } = rig()
  await reservations.reserve(request('a', ['10.0.0.0/24']), always)
  reservations.observe(serviceCIDR('a', '10.0.0.0/24'))
  clock.now = start + ttlMs - 1
  await reservations.reserve(request('b', ['10.0.1.0/24']), always)
  t.same(held(store).map((item) => item.name), ['a', 'b'], 'still held one millisecond before it expires')
  clock.now = start + ttlMs
  await reservations.reserve(request('c', ['10.0.2.0/24']), always)
  t.same(held(store).map((item) => item.name), ['b', 'c'], 'pruned once expired')
})

t.test('a request retried under the same name replaces its earlier entry', async (t) => {
  const { store, reservations, clock } = rig()
  await reservations.reserve(request('a', ['10.0.0.0/24'], 'uid-1'), always)
  clock.now = start + 1000
  await reservations.reserve(request('a', ['10.0.0.0/24'], 'uid-2'), always)
  t.same(held(store), [{ ...entry('a', ['10.0.0.0/24'], start + 1000 + ttlMs, 'replica-1'), uid: 'uid-2' }])
})

t.test('a request retried under the same name with other CIDRs is kept beside its earlier entry: either may be the one stored', async (t) => {
  const { store, reservations, clock } = rig()
  await reservations.reserve(request('a', ['10.0.0.0/24'], 'uid-1'), always)
  clock.now = start + 1000
  await reservations.reserve(request('a', ['10.0.1.0/24'], 'uid-2'), always)
  t.same(held(store), [{ ...entry('a', ['10.0.0.0/24'], start + ttlMs, 'replica-1'), uid: 'uid-1' }, { ...entry('a', ['10.0.1.0/24'], start + 1000 + ttlMs, 'replica-1'), uid: 'uid-2' }])
  clock.now = start + 2000
  await reservations.reserve(request('a', ['fd00::/64', '10.0.0.0/24'], 'uid-3'), always)
  await reservations.reserve(request('a', ['10.0.0.0/24', 'fd00::/64'], 'uid-4'), always)
  t.same(held(store).map((item) => item.uid), ['uid-1', 'uid-2', 'uid-4'], 'the same CIDRs in another order are the same request')
})

t.test('two requests of the same name and CIDRs in one write: the later replaces the earlier, as in the replica\'s own model', async (t) => {
  const { store, reservations } = rig()
  const results = await Promise.all([
    reservations.reserve(request('a', ['10.0.0.0/24'], 'uid-1'), always),
    reservations.reserve(request('b', ['10.0.1.0/24']), always),
    reservations.reserve(request('a', ['10.0.0.0/24'], 'uid-2'), always),
    reservations.reserve(request('a', ['10.0.2.0/24'], 'uid-3'), always),
  ])
  t.same(results, [{ outcome: 'recorded' }, { outcome: 'recorded' }, { outcome: 'recorded' }, { outcome: 'recorded' }], 'all recorded')
  t.equal(store.updates, 1, 'in one write')
  t.same(held(store), [{ ...entry('a', ['10.0.0.0/24'], start + ttlMs, 'replica-1'), uid: 'uid-2' }, entry('b', ['10.0.1.0/24'], start + ttlMs, 'replica-1'), { ...entry('a', ['10.0.2.0/24'], start + ttlMs, 'replica-1'), uid: 'uid-3' }], 'one entry for a with those CIDRs, the later request\'s; one with other CIDRs beside it')
})

t.test('apiserver down, Lease missing, RBAC refusing, object refused: fail closed with a reason that says what happened', async (t) => {
  const cases = [
    { kind: 'unavailable', reason: 'unavailable', detail: /^kube-apiserver could not be reached: injected unavailable$/ },
    { kind: 'forbidden', reason: 'forbidden', detail: /may not read or update the Lease servicecidr-guard-system\/servicecidr-guard-reservations .*its Role grants get and update/ },
    { kind: 'rejected', reason: 'rejected', detail: /kube-apiserver refused the update of the Lease/ },
    { kind: 'timeout', reason: 'deadline', detail: /did not answer in time/ },
  ] as const
  for (const { kind, reason, detail } of cases) {
    const store = new MemoryLeaseStore()
    store.failWith = kind
    const { reservations, settled } = rig(store)
    const result = await reservations.reserve(request('a', ['10.0.0.0/24']), always)
    t.match(result, { outcome: 'failed', reason, detail }, kind)
    t.same(settled, [reason], `${kind}: counted as ${reason}`)
  }
  const { reservations } = rig(new MemoryLeaseStore({ missing: true }))
  t.match(await reservations.reserve(request('a', ['10.0.0.0/24']), always), {
    outcome: 'failed',
    reason: 'missing',
    detail: 'the Lease servicecidr-guard-system/servicecidr-guard-reservations does not exist (it comes with the webhook\'s manifests; apply them again)',
  })
})

t.test('a write that fails after a successful read drops the cached copy and fails closed', async (t) => {
  const { store, reservations, writes } = rig()
  await reservations.reserve(request('a', ['10.0.0.0/24']), always)
  store.failWith = 'unavailable'
  const started = Date.now()
  t.match(await reservations.reserve(request('b', ['10.0.1.0/24']), always), { outcome: 'failed', reason: 'unavailable' })
  t.same(writes, ['written', 'error'])
  t.equal(store.gets, 1 + 4, 'the outage ridden out for four reads, 50, 100, 200 and 400 ms apart')
  t.ok(Date.now() - started < 1000, 'then refused, within the deadline, with the reason')
  store.failWith = undefined
  t.same(await reservations.reserve(request('c', ['10.0.2.0/24']), always), { outcome: 'recorded' }, 'works again once the apiserver is back')
  t.equal(store.gets, 1 + 4 + 1, 'read afresh after the failure')
})

t.test('an outage shorter than the deadline (429/5xx, no answer) is ridden out; other refusals are not retried', async (t) => {
  const { store, reservations, writes, settled } = rig()
  await reservations.reserve(request('a', ['10.0.0.0/24']), always)
  store.failWith = 'unavailable'
  setTimeout(() => { store.failWith = undefined }, 120)
  t.same(await reservations.reserve(request('b', ['10.0.1.0/24']), always), { outcome: 'recorded' }, 'recorded once kube-apiserver answers again')
  t.same(writes, ['written', 'error', 'written'])
  t.same(held(store).map((item) => item.name), ['a', 'b'])
  t.same(settled, ['recorded', 'recorded'])
  for (const kind of ['forbidden', 'rejected', 'missing'] as const) {
    store.failWith = kind
    const gets = store.gets + store.updates
    t.match(await reservations.reserve(request(`c-${kind}`, ['10.0.2.0/24']), always), { outcome: 'failed', reason: kind }, kind)
    t.equal(store.gets + store.updates - gets, 1, `${kind}: one call, not tried again`)
  }
})

t.test('a write refused as unavailable that was stored after all: written again, the entry kept once', async (t) => {
  const { store, reservations } = rig()
  await reservations.reserve(request('a', ['10.0.0.0/24']), always)
  // The PUT reaches etcd, and its answer is lost (a 503 from a proxy, a reset connection).
  const update = store.update.bind(store)
  store.update = async (lease) => {
    const stored = await update(lease)
    if (store.updates === 2) throw new StoreError('unavailable', 'injected: the answer was lost')
    return stored
  }
  t.same(await reservations.reserve(request('b', ['10.0.1.0/24']), always), { outcome: 'recorded' })
  t.same(held(store).map((item) => item.name), ['a', 'b'], 'one entry for b')
})

t.test('deadline: a hung apiserver answers nothing; the review is answered in time, failing closed', async (t) => {
  const store = new MemoryLeaseStore()
  store.hang = true
  const { reservations } = rig(store, { deadlineMs: 50 })
  const began = performance.now()
  const result = await reservations.reserve(request('a', ['10.0.0.0/24']), always)
  const took = performance.now() - began
  t.same(result, { outcome: 'failed', reason: 'deadline', detail: 'recording it in Lease servicecidr-guard-system/servicecidr-guard-reservations took longer than 0.05 s' })
  t.ok(took >= 45 && took < 1000, `answered after the deadline, not before and not much later (${took.toFixed(0)} ms)`)
  store.hang = false
  t.same(await reservations.reserve(request('b', ['10.0.1.0/24']), always), { outcome: 'recorded' }, 'the hung call did not hold the queue: the next review is recorded')
})

t.test('a hung write does not hold the queue either: it is given up at its reviews\' deadline', async (t) => {
  const store = new MemoryLeaseStore()
  const { reservations, writes } = rig(store, { deadlineMs: 50 })
  t.same(await reservations.reserve(request('a', ['10.0.0.0/24']), always), { outcome: 'recorded' })
  store.hang = true
  const gets = store.gets
  t.same(await reservations.reserve(request('b', ['10.0.1.0/24']), always), { outcome: 'failed', reason: 'deadline', detail: 'recording it in Lease servicecidr-guard-system/servicecidr-guard-reservations took longer than 0.05 s' })
  t.equal(store.gets, gets, 'the call that hung was the PUT, made from the kept copy')
  // The write's own bound is set a turn after the review's deadline timer, so it may fire a
  // millisecond later.
  for (let waited = 0; reservations.lastError === undefined && waited < 1000; waited += 5) await delay(5)
  t.match(reservations.lastError, /^kube-apiserver did not answer in time: no answer within \d+ ms$/, 'the call given up is reported')
  store.hang = false
  t.same(await reservations.reserve(request('c', ['10.0.2.0/24']), always), { outcome: 'recorded' }, 'the next review is recorded')
  t.same(writes, ['written', 'error', 'written'])
})

t.test('deadlines: one timer answers each waiting review at its own deadline, not at the first one\'s, and none is left waiting', async (t) => {
  const store = new MemoryLeaseStore()
  store.hang = true
  const { reservations } = rig(store, { deadlineMs: 60 })
  // How long after it was made each review was answered, or 'unanswered' a second later.
  const timed = async (name: string, cidr: string): Promise<number | 'unanswered'> => {
    const began = performance.now()
    const result = await Promise.race([reservations.reserve(request(name, [cidr]), always), delay(1000, undefined)])
    if (result === undefined) return 'unanswered'
    // From the deadline's timer: a batch's call to kube-apiserver is bounded too, but later (the rig's
    // clock stands still) and with another message.
    t.same(result, { outcome: 'failed', reason: 'deadline', detail: 'recording it in Lease servicecidr-guard-system/servicecidr-guard-reservations took longer than 0.06 s' }, `${name} failed closed, by the deadline's timer`)
    return performance.now() - began
  }
  const a = timed('a', '10.0.0.0/24')
  await delay(30)
  const b = timed('b', '10.0.1.0/24')
  // After both were answered: a review made when none waits gets a timer again.
  await Promise.all([a, b])
  const c = timed('c', '10.0.2.0/24')
  for (const [name, took] of Object.entries({ a: await a, b: await b, c: await c })) {
    t.ok(typeof took === 'number' && took >= 55 && took < 400, `${name} answered ${typeof took === 'number' ? `${took.toFixed(0)} ms after it was made` : 'never'}: at its deadline (60 ms), not before and not much later`)
  }
})

t.test('one write in flight per replica: requests that arrive together go in one write, what queues meanwhile in the next, and never conflict', async (t) => {
  const store = new MemoryLeaseStore()
  store.latencyMs = 20
  const { reservations } = rig(store)
  const ask = (i: number): Promise<ReserveResult> => reservations.reserve(request(`r${String(i)}`, [`10.0.${String(i)}.0/24`]), always)
  const together = await Promise.all([0, 1, 2].map(ask))
  t.equal(store.updates, 1, 'three requests made in one turn of the event loop: one write')
  const first = ask(3)
  // One turn later the write of r3 is in flight; the next six queue behind it.
  await new Promise((resolve) => { setImmediate(resolve) })
  const rest = await Promise.all([4, 5, 6, 7, 8, 9].map(ask))
  t.same([...together, await first, ...rest], Array.from({ length: 10 }, () => ({ outcome: 'recorded' })))
  t.equal(store.updates, 3, 'then r3 alone, and the six that queued while its write was in flight in one more')
  t.equal(store.conflicts, 0, 'no conflict with itself')
  t.equal(held(store).length, 10)
})

t.test('a batch: each request is decided on its own; the refused ones are left out of the write', async (t) => {
  const store = new MemoryLeaseStore({ annotation: formatReservations([entry('other', ['10.0.5.0/24'], start + ttlMs)]) })
  store.latencyMs = 10
  const { reservations } = rig(store)
  const first = reservations.reserve(request('first', ['10.0.0.0/24']), always)
  const refuse = (entries: readonly Reservation[]): boolean => !entries.some((item) => item.name === 'other')
  const [a, b, c] = await Promise.all([first, reservations.reserve(request('clash', ['10.0.5.0/25']), refuse), reservations.reserve(request('fine', ['10.0.6.0/24']), always)])
  t.same([a, b, c], [{ outcome: 'recorded' }, { outcome: 'refused' }, { outcome: 'recorded' }])
  t.same(held(store).map((item) => item.name), ['other', 'first', 'fine'])
})

t.test('a Lease too full to take more fails closed', async (t) => {
  const store = new MemoryLeaseStore({ annotation: formatReservations([entry('x', ['10.1.0.0/24'], start + ttlMs), entry('y', ['10.1.1.0/24'], start + ttlMs)]) })
  const { reservations } = rig(store, { maxEntries: 2 })
  t.same(await reservations.reserve(request('a', ['10.0.0.0/24']), always), {
    outcome: 'failed',
    reason: 'full',
    detail: 'the Lease servicecidr-guard-system/servicecidr-guard-reservations already holds 2 reservations, the most it takes is 2',
  })
  t.equal(store.updates, 0)
})

t.test('a Lease whose annotation would outgrow what kube-apiserver takes fails closed as full, before the write', async (t) => {
  // Two long-named entries held; a third would take the annotation past the cap.
  const long = (letter: string): string => `${letter.repeat(63)}.${'n'.repeat(63)}.${'m'.repeat(63)}.${'o'.repeat(61)}`
  const annotation = formatReservations([entry(long('x'), ['10.1.0.0/24'], start + ttlMs), entry(long('y'), ['10.1.1.0/24'], start + ttlMs)])
  const store = new MemoryLeaseStore({ annotation })
  const { reservations } = rig(store, { maxBytes: Buffer.byteLength(annotation) + 100 })
  const result = await reservations.reserve(request(long('a'), ['10.0.0.0/24']), always)
  t.match(result, { outcome: 'failed', reason: 'full', detail: /^the Lease servicecidr-guard-system\/servicecidr-guard-reservations already holds 2 reservations; with this one they would take \d+ bytes, the most its annotation takes is \d+$/ })
  t.equal(store.updates, 0)
  // A short name still fits.
  const { reservations: roomy } = rig(new MemoryLeaseStore({ annotation }), { maxBytes: Buffer.byteLength(annotation) + 200 })
  t.same(await roomy.reserve(request('a', ['10.0.0.0/24']), always), { outcome: 'recorded' })
})

t.test('the byte cap is needed beside the entry cap, and stays within kube-apiserver\'s 256 KiB', (t) => {
  const name = (i: number): string => `${String(i).padStart(4, '0')}${'n'.repeat(59)}.${'n'.repeat(63)}.${'m'.repeat(63)}.${'o'.repeat(61)}`
  const entries = Array.from({ length: 1000 }, (_, i) => entry(name(i), ['fd00:1234:5678:9abc:def0:1234:5678:0/112', '10.1.1.0/24'], start + ttlMs))
  t.ok(Buffer.byteLength(formatReservations(entries)) > maxAnnotationBytes, 'the entry cap alone would not keep it under')
  t.ok(maxAnnotationBytes < 256 * 1024 - 16 * 1024, 'room is left for the Lease\'s other annotations')
  t.end()
})

t.test('an annotation that does not parse is dropped with a warning and written over', async (t) => {
  for (const annotation of ['not json', '{"a": 1}', '[{"name": "x"}, {"name": "ok", "cidrs": ["10.9.0.0/24"], "expires": "2026-12-01T10:00:05Z"}]', '[null, 1, "x", [], {"name": "ok", "cidrs": ["10.9.0.0/24"], "expires": "2026-12-01T10:00:05Z"}]']) {
    const { store, reservations, warnings } = rig(new MemoryLeaseStore({ annotation }))
    t.same(await reservations.reserve(request('a', ['10.0.0.0/24']), always), { outcome: 'recorded' }, annotation)
    t.same(warnings, ['reservations in the Lease that do not parse are dropped'], `${annotation}: a warning`)
    t.same(held(store).map((item) => item.name), annotation.includes('"ok"') ? ['ok', 'a'] : ['a'], `${annotation}: the entries that parse are kept`)
  }
})

t.test('a recheck that throws (a bug) fails closed instead of leaving the review waiting', async (t) => {
  const { reservations, settled } = rig()
  const result = await reservations.reserve(request('a', ['10.0.0.0/24']), () => { throw new TypeError('boom') })
  t.same(result, { outcome: 'failed', reason: 'internal', detail: 'an internal error (boom)' })
  t.same(settled, ['internal'])
  t.same(await reservations.reserve(request('b', ['10.0.1.0/24']), always), { outcome: 'recorded' }, 'and keeps working')
})

t.test('after an unexpected failure the Lease is read again: one bad copy does not fail every write until a restart', async (t) => {
  const store = new MemoryLeaseStore({ annotation: formatReservations([entry('poison', ['10.9.0.0/24'], start + ttlMs)]) })
  const { reservations, settled } = rig(store)
  t.equal(await reservations.probe(), undefined, 'the copy read at start-up holds the entry')
  const throwsOnPoison = (entries: readonly Reservation[]): boolean => {
    if (entries.some((item) => item.name === 'poison')) throw new TypeError('cannot read this entry')
    return true
  }
  t.same(await reservations.reserve(request('a', ['10.0.0.0/24']), throwsOnPoison), { outcome: 'failed', reason: 'internal', detail: 'an internal error (cannot read this entry)' })
  store.overwrite('[]')
  t.same(await reservations.reserve(request('b', ['10.0.1.0/24']), throwsOnPoison), { outcome: 'recorded' }, 'the Lease as it is now, not the copy that failed')
  t.same(settled, ['internal', 'recorded'])
  t.same(held(store).map((item) => item.name), ['b'])
})

t.test('expired unseen: a reservation of ours whose ServiceCIDR the watch never showed is counted once it expires', async (t) => {
  const { reservations, clock, expired } = rig()
  await reservations.reserve(request('shown', ['10.0.0.0/24']), always)
  await reservations.reserve(request('added-family', ['fd00::/64']), always)
  await reservations.reserve(request('forged', ['10.0.2.0/24']), always)
  await reservations.reserve(request('other-cidrs', ['10.0.3.0/24']), always)
  await reservations.reserve(request('retried', ['10.0.5.0/24']), always)
  await reservations.reserve(request('retried', ['10.0.6.0/24']), always)
  reservations.observe(serviceCIDR('shown', '10.0.0.0/24'))
  reservations.observe(serviceCIDR('added-family', '10.0.1.0/24', 'fd00::/64'))
  reservations.observe(serviceCIDR('other-cidrs', '10.0.4.0/24'))
  reservations.observe(serviceCIDR('retried', '10.0.6.0/24'))
  clock.now = start + ttlMs - 1
  t.equal(reservations.sweep(), 0, 'nothing expired yet')
  clock.now = start + ttlMs
  t.equal(reservations.sweep(), 3, 'the forged one, the one whose object never carried its CIDRs, and the retried one\'s first CIDRs')
  t.same(expired, [3])
  t.equal(reservations.sweep(), 0, 'each counted once')
})

t.test('expired unseen: one written later is counted when it expires, after the earlier ones', async (t) => {
  const { reservations, clock, expired } = rig()
  await reservations.reserve(request('early', ['10.0.0.0/24']), always)
  clock.now = start + 3000
  await reservations.reserve(request('late', ['10.0.1.0/24']), always)
  clock.now = start + ttlMs
  t.equal(reservations.sweep(), 1, 'the early one')
  clock.now = start + 3000 + ttlMs - 1
  t.equal(reservations.sweep(), 0, 'the late one not yet')
  clock.now = start + 3000 + ttlMs
  t.equal(reservations.sweep(), 1, 'the late one')
  t.same(expired, [1, 1])
})

t.test('a settled event that throws (a metric\'s bug) costs no review its answer, and the replica keeps working', async (t) => {
  let counted = 0
  const { reservations, warnings } = rig(new MemoryLeaseStore(), {
    deadlineMs: 50,
    events: { settled: () => { counted++; throw new TypeError('not a finite number') } },
  })
  const batch = [reservations.reserve(request('a', ['10.0.0.0/24']), always), reservations.reserve(request('b', ['10.0.1.0/24']), always)]
  t.same(await Promise.all(batch), [{ outcome: 'recorded' }, { outcome: 'recorded' }], 'both of one batch answered')
  const late = new MemoryLeaseStore()
  late.hang = true
  const slow = rig(late, { deadlineMs: 50, events: { settled: () => { throw new TypeError('not a finite number') } } })
  t.same(await slow.reservations.reserve(request('c', ['10.0.2.0/24']), always), { outcome: 'failed', reason: 'deadline', detail: 'recording it in Lease servicecidr-guard-system/servicecidr-guard-reservations took longer than 0.05 s' }, 'answered at its deadline, from the timer')
  t.equal(counted, 2)
  t.same(warnings, ['counting a settled reservation failed', 'counting a settled reservation failed'])
})

t.test('a start-up read answered after a write does not replace the newer copy the write left', async (t) => {
  const store = new MemoryLeaseStore()
  const { reservations, writes } = rig(store)
  const read = store.get.bind(store)
  let first = true
  store.get = async () => {
    const lease = await read()
    if (first) {
      first = false
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    return lease
  }
  const probing = reservations.probe()
  t.same(await reservations.reserve(request('a', ['10.0.0.0/24']), always), { outcome: 'recorded' })
  t.equal(await probing, undefined)
  t.same(await reservations.reserve(request('b', ['10.0.1.0/24']), always), { outcome: 'recorded' })
  t.same(writes, ['written', 'written'], 'no conflict with its own write')
})

t.test('probe: reports a Lease that cannot be read, and clears once it can', async (t) => {
  const store = new MemoryLeaseStore()
  store.failWith = 'forbidden'
  const { reservations } = rig(store)
  t.equal(await reservations.probe(), 'injected forbidden')
  t.equal(reservations.lastError, 'injected forbidden')
  store.failWith = undefined
  t.equal(await reservations.probe(), undefined)
  t.equal(reservations.lastError, undefined)
})

t.test('parseReservations and formatReservations round-trip', (t) => {
  const entries = [entry('a', ['10.0.0.0/24', 'fd00::/64'], start + 1234), entry('b', ['10.0.1.0/24'], start)]
  t.same(parseReservations(formatReservations(entries)), { entries, malformed: 0 })
  t.same(parseReservations(undefined), { entries: [], malformed: 0 })
  t.same(parseReservations(''), { entries: [], malformed: 0 })
  t.same(parseReservations('[{"name": "a", "cidrs": [1], "expires": "2026-12-01T10:00:00Z"}, {"name": "b", "cidrs": [], "expires": "soon"}]'), { entries: [], malformed: 2 })
  t.same(parseReservations(`[null, 0, "a", [], true, ${formatReservations(entries).slice(1)}`), { entries, malformed: 5 }, 'entries that are not objects are malformed too, and do not throw')
  t.end()
})

t.test('two replicas on one Lease: of two overlapping requests racing, exactly one is recorded', async (t) => {
  const store = new MemoryLeaseStore()
  store.latencyMs = 2
  const one = rig(store).reservations
  const two = rig(store, { replica: 'replica-2' }).reservations
  const overlapsHeld = (cidr: string) => (entries: readonly Reservation[]): boolean => !entries.some((item) => item.cidrs.includes(cidr))
  for (let pair = 0; pair < 20; pair++) {
    const cidr = `10.1.${String(pair)}.0/24`
    const results: ReserveResult[] = await Promise.all([
      one.reserve(request(`a-${String(pair)}`, [cidr]), overlapsHeld(cidr)),
      two.reserve(request(`b-${String(pair)}`, [cidr]), overlapsHeld(cidr)),
    ])
    t.same(results.map((result) => result.outcome).sort(), ['recorded', 'refused'], `pair ${String(pair)}: one recorded, one refused`)
  }
  t.ok(store.conflicts > 0, `the replicas did conflict (${String(store.conflicts)} times) and resolved it by reading again`)
})

t.test('a replica that keeps writing does not starve another: the other records every request within its attempts', async (t) => {
  const store = new MemoryLeaseStore()
  store.latencyMs = 5
  // Real clocks: whether a writer is streaming is told from how long its last write took.
  const busy = rig(store, { now: Date.now }).reservations
  const other = rig(store, { replica: 'replica-2', now: Date.now }).reservations
  const busyState = { stop: false }
  let busyRecorded = 0
  // replica-1 has a reservation queued at every turn: the next is asked for as soon as one settles.
  const writer = (async (): Promise<void> => {
    for (let i = 0; !busyState.stop; i++) {
      const result = await busy.reserve(request(`busy-${String(i)}`, [`10.2.${String(i % 250)}.0/24`]), always)
      if (result.outcome === 'recorded') busyRecorded++
    }
  })()
  await new Promise((resolve) => setTimeout(resolve, 20))
  const results: string[] = []
  const busyBefore = busyRecorded
  for (let k = 0; k < 5; k++) results.push((await other.reserve(request(`other-${String(k)}`, [`10.3.${String(k)}.0/24`]), always)).outcome)
  const busyDuring = busyRecorded - busyBefore
  busyState.stop = true
  await writer
  t.same(results, ['recorded', 'recorded', 'recorded', 'recorded', 'recorded'], 'every request of the other replica recorded, none failed for conflicts')
  // Whether a given turn ends in a 409 is up to timing (with the rule, either may win at once);
  // that the busy replica wrote all along while the other was recording is not.
  t.ok(busyDuring > 0, `the busy replica kept writing while the other recorded (${String(busyDuring)} recorded meanwhile, ${String(store.conflicts)} conflicts)`)
})
