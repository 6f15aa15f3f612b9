// spec.capacity.warnWhenFreeBelow: warnings on allowed ServiceCIDR deletions and Service creation,
// never a denial.

import t from 'tap'
import { capacityWarnings } from '../../../src/policy/capacity.ts'
import { decide, decideService } from '../../../src/policy/engine.ts'
import { cluster, policy, remove, serviceCIDR, serviceIP } from '../../support/fixtures.ts'

const watchful = policy({ capacity: { warnWhenFreeBelow: { IPv4: 10, IPv6: 100 } } })
const full = cluster({
  serviceCIDRs: [serviceCIDR('kubernetes', '10.96.0.0/28'), serviceCIDR('extra', '34.118.224.0/28')],
  ipAddresses: ['10.96.0.1', '10.96.0.2', '10.96.0.3', '10.96.0.4', '10.96.0.5', '10.96.0.6'].map((ip, index) => serviceIP(ip, 'default', `svc-${index}`)),
})

t.test('no thresholds, no warnings', (t) => {
  t.same(capacityWarnings(policy(), full, ['IPv4', 'IPv6']), [])
  t.end()
})

t.test('a family below its threshold warns once, with the figures', (t) => {
  const small = cluster({ serviceCIDRs: [serviceCIDR('kubernetes', '10.96.0.0/28')], ipAddresses: [serviceIP('10.96.0.1', 'default', 'kubernetes'), serviceIP('10.96.0.2', 'default', 'a'), serviceIP('10.96.0.3', 'default', 'b'), serviceIP('10.96.0.4', 'default', 'c'), serviceIP('10.96.0.5', 'default', 'd'), serviceIP('10.96.0.6', 'default', 'e')] })
  t.same(capacityWarnings(watchful, small, ['IPv4', 'IPv4']), [
    'servicecidr-guard: only 8 of 14 IPv4 Service addresses are free in this cluster (the policy warns below 10); add a ServiceCIDR before Services fail with "range is full"',
  ])
  t.end()
})

t.test('an IPv6 range shorter than /64 adds no capacity: the warning still comes', (t) => {
  // The /48 is valid, but NewIPAllocator refuses it: IPv6 Services fail with "range is full".
  const sixFull = cluster({
    serviceCIDRs: [serviceCIDR('kubernetes', '10.96.0.0/28', 'fd00:10:96::/124'), serviceCIDR('wide', 'fd00:20::/48')],
    ipAddresses: Array.from({ length: 15 }, (_, i) => serviceIP(`fd00:10:96::${(i + 1).toString(16)}`, 'default', `svc-${i}`)),
  })
  t.same(capacityWarnings(watchful, sixFull, ['IPv6']), [
    'servicecidr-guard: only 0 of 15 IPv6 Service addresses are free in this cluster (the policy warns below 100); add a ServiceCIDR of /64 or longer (the allocator takes nothing from a shorter IPv6 prefix) before Services fail with "range is full"',
  ])
  t.end()
})

t.test('an allowed DELETE warns about the capacity left once the range is gone', (t) => {
  const decision = decide(watchful, full, remove('extra', ['34.118.224.0/28']))
  t.equal(decision.allowed, true)
  t.same(decision.warnings, [
    'servicecidr-guard: once ServiceCIDR "extra" is gone, only 8 of 14 IPv4 Service addresses will be free in this cluster (the policy warns below 10); add a ServiceCIDR before Services fail with "range is full"',
  ])
  t.end()
})

t.test('a denied DELETE carries no capacity warning', (t) => {
  const inUse = cluster({ serviceCIDRs: [serviceCIDR('kubernetes', '10.96.0.0/28'), serviceCIDR('extra', '34.118.224.0/28')], ipAddresses: [serviceIP('34.118.224.2', 'default', 'web')] })
  const decision = decide(watchful, inUse, remove('extra', ['34.118.224.0/28']))
  t.equal(decision.allowed, false)
  t.same(decision.warnings, [])
  t.end()
})

t.test('Service CREATE: always allowed; warns for the families it takes addresses from', (t) => {
  const twoLeft = cluster({
    serviceCIDRs: [serviceCIDR('kubernetes', '10.96.0.0/29')],
    ipAddresses: ['10.96.0.1', '10.96.0.2', '10.96.0.3', '10.96.0.4'].map((ip, index) => serviceIP(ip, 'default', `svc-${index}`)),
  })
  const cases = [
    { name: 'IPv4 Service', families: ['IPv4'] as const, warned: true },
    { name: 'the cluster default family (from the kubernetes ServiceCIDR)', families: undefined, warned: true },
    { name: 'headless or ExternalName: no address taken', families: [] as const, warned: false },
  ]
  for (const testCase of cases) {
    const decision = decideService(watchful, twoLeft, { operation: 'CREATE', namespace: 'default', name: 'web', families: testCase.families })
    t.equal(decision.allowed, true, testCase.name)
    t.equal(decision.warnings.length, testCase.warned ? 1 : 0, `${testCase.name}: warnings`)
  }
  t.same(decideService(watchful, undefined, { operation: 'CREATE', namespace: 'default', name: 'web', families: ['IPv4'] }).warnings, [], 'no view: no guess, no warning')
  t.end()
})

t.test('Service UPDATE: warns only for the families it takes an address from anew', (t) => {
  const bothLow = cluster({
    serviceCIDRs: [serviceCIDR('kubernetes', '10.96.0.0/29'), serviceCIDR('v6', 'fd00::/125')],
    ipAddresses: [
      ...['10.96.0.1', '10.96.0.2', '10.96.0.3', '10.96.0.4'].map((ip, index) => serviceIP(ip, 'default', `svc-${index}`)),
      ...['fd00::1', 'fd00::2', 'fd00::3', 'fd00::4'].map((ip, index) => serviceIP(ip, 'default', `svc6-${index}`)),
    ],
  })
  const cases = [
    { name: 'ExternalName to ClusterIP: every family it now takes', families: ['IPv4'] as const, held: [] as const, warned: ['IPv4'] },
    { name: 'ExternalName to dual-stack: both', families: ['IPv4', 'IPv6'] as const, held: [] as const, warned: ['IPv4', 'IPv6'] },
    { name: 'single- to dual-stack: the second family only', families: ['IPv4', 'IPv6'] as const, held: ['IPv4'] as const, warned: ['IPv6'] },
    { name: 'the same families (a port or selector changed): nothing', families: ['IPv4'] as const, held: ['IPv4'] as const, warned: [] },
    { name: 'dual- to single-stack: nothing taken', families: ['IPv4'] as const, held: ['IPv4', 'IPv6'] as const, warned: [] },
    { name: 'ClusterIP to ExternalName: nothing taken', families: [] as const, held: ['IPv4'] as const, warned: [] },
    { name: 'neither says its families: both the default family, nothing taken', families: undefined, held: undefined, warned: [] },
    { name: 'from ExternalName, families not set: the default family', families: undefined, held: [] as const, warned: ['IPv4'] },
  ]
  for (const testCase of cases) {
    const decision = decideService(watchful, bothLow, { operation: 'UPDATE', namespace: 'default', name: 'web', families: testCase.families, held: testCase.held })
    t.equal(decision.allowed, true, testCase.name)
    t.same(decision.warnings.map((warning) => /(IPv[46]) Service addresses/.exec(warning)?.[1]), testCase.warned, `${testCase.name}: warned for`)
  }
  t.same(decideService(watchful, bothLow, { operation: 'CREATE', namespace: 'default', name: 'web', families: ['IPv4', 'IPv6'], held: ['IPv4', 'IPv6'] }).warnings.length, 2, 'held is read for an UPDATE only: a CREATE takes every family')
  t.end()
})
