// The reviewer with its reservations: several replicas, each with its own cluster model, sharing one
// Lease (in memory, with kube-apiserver's resourceVersion preconditions). What is reserved where,
// what is released, and the guarantee: of two overlapping CREATEs racing through two replicas,
// exactly one is admitted; with the shared reservation off, both are.

import t from 'tap'
import { createReviewer, type ClusterPort, type Outcome } from '../../../src/admission/reviewer.ts'
import { parseReservations, SharedReservations } from '../../../src/cluster/reservations.ts'
import type { ReservedRange } from '../../../src/policy/reservations.ts'
import { ClusterState } from '../../../src/policy/state.ts'
import type { Policy } from '../../../src/policy/types.ts'
import { MemoryLeaseStore } from '../../support/lease-store.ts'
import { policy as makePolicy, serviceCIDR } from '../../support/fixtures.ts'
import { admissionReview } from '../../support/review.ts'

interface Replica {
  /** Reviews an AdmissionReview sent as the apiserver sends it: its JSON bytes. */
  readonly review: (review: Record<string, unknown>) => Promise<Outcome>
  readonly state: ClusterState
}

/** The cluster as a replica's reviewer reaches it: `state`, always known; reservations held until released. */
const clusterOf = (state: ClusterState): ClusterPort => ({
  view: () => state,
  current: () => Promise.resolve(),
  reserve: (record) => { state.reserve(record, Number.MAX_SAFE_INTEGER) },
  release: (record) => { state.release(record) },
})

function replica(store: MemoryLeaseStore | undefined, policy: Policy = makePolicy(), name = 'replica-1'): Replica {
  const state = new ClusterState()
  state.replaceServiceCIDRs([serviceCIDR('kubernetes', '10.96.0.0/28')])
  const reservations = store && new SharedReservations({ store, replica: name, ttlMs: 10_000, deadlineMs: 2000, log: { warn: () => undefined } })
  const reviewer = createReviewer({
    policy: () => policy,
    cluster: clusterOf(state),
    reservations,
  })
  return { review: async (review) => reviewer(Buffer.from(JSON.stringify(review))), state }
}

const pending = (state: ClusterState): string[] => [...state.pendingServiceCIDRs()].map((record) => record.name)
const allowed = (outcome: Outcome): boolean => outcome.decision?.allowed === true
const heldNames = (store: MemoryLeaseStore): string[] => parseReservations(store.annotation).entries.map((entry) => `${entry.name} ${entry.cidrs.join(',')}`)

async function race(one: Replica, two: Replica, pairs: number): Promise<{ both: number, one: number, none: number }> {
  const results = await Promise.all(Array.from({ length: pairs }, async (_, pair) => {
    const [a, b] = await Promise.all([
      one.review(admissionReview('CREATE', `a-${String(pair)}`, [`10.1.${String(pair)}.0/24`])),
      two.review(admissionReview('CREATE', `b-${String(pair)}`, [`10.1.${String(pair)}.128/25`])),
    ])
    return Number(allowed(a)) + Number(allowed(b))
  }))
  return { both: results.filter((n) => n === 2).length, one: results.filter((n) => n === 1).length, none: results.filter((n) => n === 0).length }
}

t.test('two replicas, one Lease: of two overlapping CREATEs racing, exactly one is admitted', async (t) => {
  const store = new MemoryLeaseStore()
  store.latencyMs = 1
  const counts = await race(replica(store), replica(store, makePolicy(), 'replica-2'), 50)
  t.same(counts, { both: 0, one: 50, none: 0 }, '50 pairs: never both, never neither')
  t.ok(store.conflicts > 0, `the replicas raced for the Lease (${String(store.conflicts)} conflicts)`)
})

t.test('the same race with the shared reservation off: every pair is admitted twice', async (t) => {
  const counts = await race(replica(undefined), replica(undefined, makePolicy(), 'replica-2'), 50)
  t.same(counts, { both: 50, one: 0, none: 0 }, 'what the shared reservation prevents')
})

t.test('overlap: AllowExpansion: a CREATE expanding one this replica admitted just before leaves both admitted, in the order they were decided', async (t) => {
  const store = new MemoryLeaseStore()
  const one = replica(store, makePolicy({ overlap: 'AllowExpansion' }))
  const [narrow, wide] = await Promise.all([
    one.review(admissionReview('CREATE', 'narrow', ['10.1.0.0/22'])),
    one.review(admissionReview('CREATE', 'wide', ['10.1.0.0/21'])),
  ])
  t.ok(allowed(narrow), 'the /22, decided first, stands: the /21 came after it')
  t.ok(allowed(wide), 'the /21 strictly contains it: an expansion')
  t.same(heldNames(store).sort(), ['narrow 10.1.0.0/22', 'wide 10.1.0.0/21'], 'both recorded, in one write')
  t.equal(store.updates, 1)
})

t.test('a CREATE refused for another replica\'s reservation names it, and releases the local reservation', async (t) => {
  const store = new MemoryLeaseStore()
  const one = replica(store)
  const two = replica(store, makePolicy(), 'replica-2')
  t.ok(allowed(await one.review(admissionReview('CREATE', 'first', ['10.0.0.0/24']))))
  const second = await two.review(admissionReview('CREATE', 'second', ['10.0.0.0/25']))
  t.equal(second.decision?.allowed, false)
  t.match(second.decision?.message, 'spec.cidrs[0] 10.0.0.0/25 overlaps ServiceCIDR "first" (10.0.0.0/24, admitted moments ago)')
  t.equal(second.reservation, 'refused')
  t.same(pending(two.state), [], 'replica-2 holds nothing for the refused CREATE')
  t.same(heldNames(store), ['first 10.0.0.0/24'])
})

t.test('a name admitted twice with different CIDRs: until the watch shows which object was stored, both ranges count on every replica', async (t) => {
  // Replica-1 admits "retried" 10.0.0.0/24, whose CREATE is then refused after admission (another
  // webhook, a quota); the user retries it as 10.1.0.0/24 and replica-2 admits that. A third
  // CREATE overlapping the retry reaches replica-1 before its watch shows the stored object.
  const store = new MemoryLeaseStore()
  const one = replica(store)
  const two = replica(store, makePolicy(), 'replica-2')
  t.ok(allowed(await one.review(admissionReview('CREATE', 'retried', ['10.0.0.0/24']))))
  t.ok(allowed(await two.review(admissionReview('CREATE', 'retried', ['10.1.0.0/24']))), 'its own name never conflicts')
  const third = await one.review(admissionReview('CREATE', 'third', ['10.1.0.0/25']))
  t.equal(third.decision?.allowed, false, 'replica-1\'s own "retried" (10.0.0.0/24) does not hide the one replica-2 recorded')
  t.match(third.decision?.message, 'overlaps ServiceCIDR "retried" (10.1.0.0/24, admitted moments ago)')
  // The other way round: replica-1 still holds its first attempt, which kube-apiserver may have stored.
  const fourth = await two.review(admissionReview('CREATE', 'fourth', ['10.0.0.0/25']))
  t.equal(fourth.decision?.allowed, false, 'replica-2 counts the first attempt too')
  t.same(heldNames(store), ['retried 10.0.0.0/24', 'retried 10.1.0.0/24'], 'both attempts held in the Lease')
  t.same(pending(one.state), ['retried'])
  two.state.upsertServiceCIDR(serviceCIDR('retried', '10.1.0.0/24'))
  t.ok(allowed(await two.review(admissionReview('CREATE', 'fifth', ['10.2.0.0/24']))), 'unrelated ranges pass')
})

t.test('one replica without the Lease: a name admitted twice with different CIDRs holds both ranges in its own model', async (t) => {
  const one = replica(undefined)
  t.ok(allowed(await one.review(admissionReview('CREATE', 'retried', ['10.0.0.0/24']))))
  t.ok(allowed(await one.review(admissionReview('CREATE', 'retried', ['10.1.0.0/24']))))
  const other = await one.review(admissionReview('CREATE', 'other', ['10.0.0.0/25']))
  t.equal(other.decision?.allowed, false, 'the first attempt may be the one stored')
  t.match(other.decision?.message, 'overlaps ServiceCIDR "retried" (10.0.0.0/24, admitted moments ago)')
})

t.test('what is recorded: CREATEs and UPDATEs adding a family; never dry runs, metadata-only UPDATEs, DELETEs, the apiserver default, or overlap: Allow', async (t) => {
  const store = new MemoryLeaseStore()
  const { review, state } = replica(store)
  const apiserver = { username: 'system:apiserver', groups: ['system:masters'] }
  const cases: { name: string, body: Record<string, unknown>, reservation: string | undefined }[] = [
    { name: 'dry-run CREATE', body: admissionReview('CREATE', 'dry', ['10.0.0.0/24'], { dryRun: true }), reservation: undefined },
    { name: 'metadata-only UPDATE', body: admissionReview('UPDATE', 'labels', ['10.0.1.0/24']), reservation: undefined },
    { name: 'DELETE', body: admissionReview('DELETE', 'gone', ['10.0.2.0/24']), reservation: undefined },
    { name: 'the apiserver\'s own default', body: admissionReview('CREATE', 'kubernetes', ['10.96.0.0/28'], { userInfo: apiserver }), reservation: undefined },
    { name: 'CREATE', body: admissionReview('CREATE', 'new', ['10.0.3.0/24']), reservation: 'recorded' },
    { name: 'UPDATE adding IPv6', body: admissionReview('UPDATE', 'dual', ['10.0.4.0/24', 'fd00::/64'], { oldCIDRs: ['10.0.4.0/24'] }), reservation: 'recorded' },
  ]
  for (const { name, body, reservation } of cases) {
    const outcome = await review(body)
    t.ok(allowed(outcome), `${name}: allowed`)
    t.equal(outcome.reservation, reservation, `${name}: ${reservation ?? 'nothing shared'}`)
  }
  t.same(heldNames(store), ['new 10.0.3.0/24', 'dual fd00::/64'], 'an UPDATE records only the CIDR it adds')
  t.same(pending(state), ['kubernetes', 'new', 'dual'], 'this replica\'s own reservations: the default too, as before')

  const open = new MemoryLeaseStore()
  const allow = replica(open, makePolicy({ overlap: 'Allow' }))
  t.equal((await allow.review(admissionReview('CREATE', 'free', ['10.0.5.0/24']))).reservation, undefined, 'overlap: Allow reads no reservation, so writes none')
  t.equal(open.updates + open.gets, 0, 'the Lease was not touched')
})

t.test('the Lease cannot be written: Deny refuses and releases; Warn and Audit admit and keep the local reservation', async (t) => {
  for (const enforcement of ['Deny', 'Warn', 'Audit'] as const) {
    const store = new MemoryLeaseStore()
    store.failWith = 'unavailable'
    const { review, state } = replica(store, makePolicy({ enforcement }))
    const outcome = await review(admissionReview('CREATE', 'extra', ['10.0.0.0/24']))
    t.equal(outcome.reservation, 'failed (unavailable)', `${enforcement}: the failure is logged`)
    t.equal(outcome.verdict, { Deny: 'denied', Warn: 'warned', Audit: 'audited' }[enforcement], `${enforcement}: ${outcome.verdict}`)
    t.same(outcome.decision?.violations.map((violation) => violation.rule), ['OverlapUnconfirmed'])
    t.same(pending(state), enforcement === 'Deny' ? [] : ['extra'], `${enforcement}: local reservation ${enforcement === 'Deny' ? 'released' : 'kept'}`)
  }
})

t.test('an exempt CREATE is recorded, so others\' checks see it, but never refused: not for an overlap, not for a failed write', async (t) => {
  const exempt = { username: 'break-glass', groups: [] }
  const policy = makePolicy({ exemptions: { usernames: ['break-glass'] } })
  const store = new MemoryLeaseStore()
  const one = replica(store, policy)
  const two = replica(store, policy, 'replica-2')
  t.ok(allowed(await one.review(admissionReview('CREATE', 'normal', ['10.0.0.0/24']))))
  const overlapping = await two.review(admissionReview('CREATE', 'exempt', ['10.0.0.0/25'], { userInfo: exempt }))
  t.ok(allowed(overlapping), 'admitted over another replica\'s reservation')
  t.equal(overlapping.reservation, 'recorded')
  const refused = await one.review(admissionReview('CREATE', 'late', ['10.0.0.64/26']))
  t.equal(refused.decision?.allowed, false, 'a later, non-exempt overlap is refused')
  store.failWith = 'forbidden'
  const failed = await two.review(admissionReview('CREATE', 'exempt-2', ['10.0.9.0/24'], { userInfo: exempt }))
  t.ok(allowed(failed), 'admitted though the Lease could not be written')
  t.same(failed.decision?.violations.map((violation) => violation.rule), ['OverlapUnconfirmed'], 'the failure is recorded for the audit log')
})

t.test('a review that finds the view unknown waits for it (ClusterPort.current) before deciding', async (t) => {
  const state = new ClusterState()
  state.replaceServiceCIDRs([serviceCIDR('kubernetes', '10.96.0.0/28')])
  let known = false
  let waits = 0
  const cluster = {
    view: () => (known ? state : undefined),
    current: () => { waits++; known = true; return Promise.resolve() },
    reserve: (record: Parameters<ClusterState['reserve']>[0]) => { state.reserve(record, Number.MAX_SAFE_INTEGER) },
    release: (record: Parameters<ClusterState['release']>[0]) => { state.release(record) },
  }
  const review = createReviewer({ policy: () => makePolicy(), cluster })
  const first = await review(Buffer.from(JSON.stringify(admissionReview('CREATE', 'a', ['10.1.0.0/24']))))
  t.ok(allowed(first), 'admitted with the view current() brought back')
  t.equal(waits, 1, 'waited once')
  await review(Buffer.from(JSON.stringify(admissionReview('CREATE', 'b', ['10.2.0.0/24']))))
  t.equal(waits, 1, 'no wait while the view is known')
})

t.test('still unknown after current(): the review fails closed', async (t) => {
  const review = createReviewer({
    policy: () => makePolicy(),
    cluster: { view: () => undefined, current: () => Promise.resolve(), reserve: () => undefined, release: () => undefined },
  })
  const outcome = await review(Buffer.from(JSON.stringify(admissionReview('CREATE', 'a', ['10.1.0.0/24']))))
  t.notOk(allowed(outcome), 'refused')
  t.match(outcome.decision?.message ?? '', 'has not finished reading')
})

/**
 * A replica whose Lease is a stand-in: `during` runs between the decision and the recheck (the
 * watch delivering, another replica writing), then the recheck is called with `held`.
 */
function recheckedReplica(during: (state: ClusterState) => void, held: readonly ReservedRange[]): { review: (name: string, cidr: string) => Promise<Outcome>, overlapReads: () => number } {
  let reads = 0
  class CountingState extends ClusterState {
    override cidrsOverlapping(prefix: Parameters<ClusterState['cidrsOverlapping']>[0]): ReturnType<ClusterState['cidrsOverlapping']> {
      reads++
      return super.cidrsOverlapping(prefix)
    }
  }
  const state = new CountingState()
  state.replaceServiceCIDRs([serviceCIDR('kubernetes', '10.96.0.0/28')])
  const reviewer = createReviewer({
    policy: () => makePolicy(),
    cluster: clusterOf(state),
    reservations: {
      reserve: (_request, recheck) => {
        during(state)
        return Promise.resolve(recheck(held) ? { outcome: 'recorded' } : { outcome: 'refused' })
      },
    },
  })
  return { review: async (name, cidr) => reviewer(Buffer.from(JSON.stringify(admissionReview('CREATE', name, [cidr])))), overlapReads: () => reads }
}

t.test('the recheck decides again only when something it did not see may overlap', async (t) => {
  await t.test('a ServiceCIDR the watch brings meanwhile is counted', async (t) => {
    const { review } = recheckedReplica((state) => { state.upsertServiceCIDR(serviceCIDR('theirs', '10.1.0.0/16')) }, [])
    const outcome = await review('mine', '10.1.2.0/24')
    t.equal(outcome.decision?.allowed, false, 'refused at the recheck')
    t.match(outcome.decision?.message, 'overlaps ServiceCIDR "theirs"')
    t.equal(outcome.reservation, 'refused')
  })
  await t.test('so is one the Lease holds that the watch shows by then (withReservations adds nothing for it)', async (t) => {
    const { review } = recheckedReplica((state) => { state.upsertServiceCIDR(serviceCIDR('theirs', '10.1.0.0/16')) }, [{ name: 'theirs', cidrs: ['10.1.0.0/16'] }])
    const outcome = await review('mine', '10.1.2.0/24')
    t.equal(outcome.decision?.allowed, false, 'refused at the recheck')
    t.match(outcome.decision?.message, 'overlaps ServiceCIDR "theirs"')
  })
  await t.test('and one the Lease holds that the watch does not show yet', async (t) => {
    const { review } = recheckedReplica(() => undefined, [{ name: 'theirs', cidrs: ['10.1.0.0/16'] }])
    const outcome = await review('mine', '10.1.2.0/24')
    t.equal(outcome.decision?.allowed, false, 'refused at the recheck')
    t.match(outcome.decision?.message, 'admitted moments ago')
  })
  await t.test('nothing new: the Lease holds only this request and what the view shows; the first decision stands', async (t) => {
    const { review, overlapReads } = recheckedReplica((state) => { state.reserve(serviceCIDR('later', '10.3.0.0/24'), Number.MAX_SAFE_INTEGER) }, [{ name: 'mine', cidrs: ['10.1.2.0/24'] }, { name: 'kubernetes', cidrs: ['10.96.0.0/28'] }])
    const outcome = await review('mine', '10.1.2.0/24')
    t.ok(allowed(outcome))
    t.equal(outcome.reservation, 'recorded')
    t.equal(overlapReads(), 1, 'decided once: a range this replica reserved since is no reason to decide again')
  })
  await t.test('a non-overlapping range from the Lease: decided again, still admitted', async (t) => {
    const { review, overlapReads } = recheckedReplica(() => undefined, [{ name: 'theirs', cidrs: ['10.9.0.0/24'] }])
    t.ok(allowed(await review('mine', '10.1.2.0/24')))
    t.equal(overlapReads(), 2, 'decided twice')
  })
})
