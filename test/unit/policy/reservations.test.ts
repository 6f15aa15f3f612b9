// Reservations held by other replicas, as the engine sees them (withReservations), and what an
// admission whose reservation could not be recorded becomes under each enforcement (unconfirmed).

import t from 'tap'
import { decide, unconfirmed } from '../../../src/policy/engine.ts'
import { withReservations } from '../../../src/policy/reservations.ts'
import { admin, cluster, create, policy, serviceCIDR, update } from '../../support/fixtures.ts'

const names = (view: { pendingServiceCIDRs(): Iterable<{ name: string }> }): string[] => [...view.pendingServiceCIDRs()].map((record) => record.name)

t.test('withReservations: what other replicas hold becomes pending here', (t) => {
  const state = cluster({
    serviceCIDRs: [serviceCIDR('kubernetes', '10.96.0.0/28'), serviceCIDR('shown', '10.0.1.0/24'), serviceCIDR('single', '10.0.3.0/24')],
    pending: [serviceCIDR('local', '10.0.2.0/24')],
  })
  const view = withReservations(state, [
    { name: 'remote', cidrs: ['10.0.0.0/24'] },
    { name: 'shown', cidrs: ['10.0.1.0/24'] },
    { name: 'local', cidrs: ['10.0.2.0/24'] },
    { name: 'single', cidrs: ['10.0.3.0/24', 'fd00::/64'] },
    { name: 'moved', cidrs: ['10.0.4.0/24'] },
  ])
  t.same(names(view), ['local', 'remote', 'single', 'moved'], 'ours first; one the watch already shows with its CIDRs is not counted; one pending here under the same name not twice; an UPDATE adding a family still counts')
  t.equal(view.pendingServiceCIDRHolding('remote', ['10.0.0.0/24'])?.cidrs[0]?.text, '10.0.0.0/24', 'one of the reservations, by name and CIDRs')
  t.equal(view.pendingServiceCIDRHolding('local', ['10.0.2.0/24']), state.pendingServiceCIDRHolding('local', ['10.0.2.0/24']), 'one of ours')
  t.equal(view.pendingServiceCIDRHolding('shown', ['10.0.1.0/24']), undefined, 'one not counted')
  t.equal(view.serviceCIDR('shown'), state.serviceCIDR('shown'), 'everything else is the view\'s')
  t.same([...view.serviceCIDRs()], [...state.serviceCIDRs()])
  t.same(view.cidrsInOrder('IPv4'), state.cidrsInOrder('IPv4'))
  t.same(view.addressesBetween('IPv4', 0n, 1n << 32n), state.addressesBetween('IPv4', 0n, 1n << 32n))
  t.same(view.cidrsOverlapping(serviceCIDR('x', '10.0.0.0/16').cidrs[0]!).map((placed) => placed.record.name).sort(), ['shown', 'single'])
  t.equal(withReservations(state, [{ name: 'shown', cidrs: ['10.0.1.0/24'] }]), state, 'nothing to add: the view itself')
  t.end()
})

t.test('decide with another replica\'s reservation: the overlap is refused, and says it was admitted moments ago', (t) => {
  const state = cluster({ serviceCIDRs: [serviceCIDR('kubernetes', '10.96.0.0/28')] })
  const request = create('mine', ['10.0.0.0/25'])
  t.equal(decide(policy(), state, request).allowed, true, 'alone it is admitted')
  const decision = decide(policy(), withReservations(state, [{ name: 'theirs', cidrs: ['10.0.0.0/24'] }]), request)
  t.equal(decision.allowed, false)
  t.match(decision.message, 'spec.cidrs[0] 10.0.0.0/25 overlaps ServiceCIDR "theirs" (10.0.0.0/24, admitted moments ago)')
  t.equal(decide(policy(), withReservations(state, [{ name: 'mine', cidrs: ['10.0.0.0/24'] }]), request).allowed, true, 'its own name never conflicts (a retry of the same request)')
  t.equal(decide(policy({ overlap: 'AllowExpansion' }), withReservations(state, [{ name: 'theirs', cidrs: ['10.0.0.0/26'] }]), request).allowed, true, 'AllowExpansion: a strictly larger range may contain it')
  t.end()
})

t.test('unconfirmed: enforcement decides what an admission without a shared reservation becomes', (t) => {
  const state = cluster({ serviceCIDRs: [serviceCIDR('kubernetes', '10.96.0.0/28')] })
  const detail = 'kube-apiserver could not be reached: connect ECONNREFUSED'
  const violation = { rule: 'OverlapUnconfirmed', field: 'spec.cidrs', message: `the overlap check across the webhook's replicas could not be completed: ${detail}` }
  const admitted = (enforcement: 'Deny' | 'Warn' | 'Audit') => decide(policy({ enforcement }), state, create('extra', ['10.0.0.0/24']))

  t.same(unconfirmed(policy(), admitted('Deny'), 'extra', detail), {
    allowed: false,
    violations: [violation],
    warnings: [],
    message: `ServiceCIDR "extra" was not admitted: ${violation.message}. Nothing was created; retry in a few seconds, and if this keeps happening, ask your platform team to check the servicecidr-guard webhook.`,
    bypass: undefined,
    cidrs: ['10.0.0.0/24'],
  }, 'Deny: refused, saying what happened and to retry')
  t.same(unconfirmed(policy({ enforcement: 'Warn' }), admitted('Warn'), 'extra', detail), {
    allowed: true,
    violations: [violation],
    warnings: [`servicecidr-guard (Warn): ${violation.message}; another replica may have admitted an overlapping range at the same moment`],
    message: '',
    bypass: undefined,
    cidrs: ['10.0.0.0/24'],
  }, 'Warn: admitted with a warning')
  t.same(unconfirmed(policy({ enforcement: 'Audit' }), admitted('Audit'), 'extra', detail), {
    allowed: true, violations: [violation], warnings: [], message: '', bypass: undefined, cidrs: ['10.0.0.0/24'],
  }, 'Audit: admitted, the violation recorded')

  const warned = decide(policy({ enforcement: 'Warn', allowedRanges: ['10.1.0.0/16'] }), state, create('extra', ['10.0.0.0/24']))
  t.same(unconfirmed(policy({ enforcement: 'Warn' }), warned, 'extra', detail).warnings.length, 2, 'Warn: the policy\'s own warnings are kept')

  const exempt = decide(policy({ exemptions: { usernames: [admin.username] } }), state, update('extra', ['10.0.0.0/24'], ['10.0.0.0/24', 'fd00::/64']))
  t.same(unconfirmed(policy({ exemptions: { usernames: [admin.username] } }), exempt, 'extra', detail), { ...exempt, violations: [violation] }, 'exempt: still admitted, the violation recorded for the audit log')
  t.end()
})
