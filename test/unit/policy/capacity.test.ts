// capacity(): free Service addresses per family, overlaps counted once, Terminating ranges left out.

import t from 'tap'
import { capacity } from '../../../src/policy/capacity.ts'
import { cluster, ipAddress, serviceCIDR, serviceIP, terminating } from '../../support/fixtures.ts'

const cases = [
  {
    name: 'the default /28: 14 usable, the kubernetes Service holds one',
    serviceCIDRs: [serviceCIDR('kubernetes', '10.96.0.0/28')],
    ipAddresses: [serviceIP('10.96.0.1', 'default', 'kubernetes')],
    family: 'IPv4',
    expected: { usable: 14n, used: 1n, free: 13n },
  },
  {
    name: 'an expansion over the default counts the union once',
    serviceCIDRs: [serviceCIDR('kubernetes', '10.96.0.0/28'), serviceCIDR('bigger', '10.96.0.0/24')],
    ipAddresses: [serviceIP('10.96.0.1', 'default', 'kubernetes'), serviceIP('10.96.0.20', 'default', 'web')],
    family: 'IPv4',
    expected: { usable: 254n, used: 2n, free: 252n },
  },
  {
    name: 'two disjoint ranges add up; a Terminating one allocates nothing',
    serviceCIDRs: [serviceCIDR('kubernetes', '10.96.0.0/28'), serviceCIDR('extra', '34.118.224.0/28'), terminating(serviceCIDR('old', '34.118.225.0/24'))],
    ipAddresses: [serviceIP('34.118.225.9', 'default', 'left-behind')],
    family: 'IPv4',
    expected: { usable: 28n, used: 0n, free: 28n },
  },
  {
    // The allocator skips every name that exists, whatever its labels (allocateNextService).
    name: 'addresses the allocator does not manage take theirs all the same',
    serviceCIDRs: [serviceCIDR('kubernetes', '10.96.0.0/28')],
    ipAddresses: [ipAddress('10.96.0.5', { managedBy: 'someone-else' })],
    family: 'IPv4',
    expected: { usable: 14n, used: 1n, free: 13n },
  },
  {
    name: 'a range full of addresses of every kind is full',
    serviceCIDRs: [serviceCIDR('kubernetes', '10.96.0.0/29')],
    ipAddresses: [
      serviceIP('10.96.0.1', 'default', 'kubernetes'),
      serviceIP('10.96.0.2', 'default', 'web'),
      ipAddress('10.96.0.3', { managedBy: 'lb.example.com', parentRef: { group: 'gateway.networking.k8s.io', resource: 'gateways', namespace: 'infra', name: 'gw' } }),
      ipAddress('10.96.0.4', { managedBy: undefined }),
      ipAddress('10.96.0.5', { family: 'IPv6' }),
      ipAddress('10.96.0.6', { family: undefined }),
      ipAddress('fd00::7', { family: 'IPv4' }),
    ],
    family: 'IPv4',
    expected: { usable: 6n, used: 6n, free: 0n },
  },
  {
    name: 'IPv6 of a dual-stack range; a /128 allocates nothing',
    serviceCIDRs: [serviceCIDR('kubernetes', '10.96.0.0/28', 'fd00::/120'), serviceCIDR('single', 'fd00:1::/128')],
    ipAddresses: [serviceIP('fd00::1', 'default', 'kubernetes')],
    family: 'IPv6',
    expected: { usable: 255n, used: 1n, free: 254n },
  },
  {
    // NewIPAllocator refuses the /48 ("shortest allowed prefix length for service CIDR is 64"):
    // the ServiceCIDR exists, but Services still fail with "range is full" once the /124 is.
    name: 'an IPv6 range shorter than /64 allocates nothing',
    serviceCIDRs: [serviceCIDR('kubernetes', 'fd00:10:96::/124'), serviceCIDR('wide', 'fd00:20::/48'), serviceCIDR('widest', 'fd00:30::/63')],
    ipAddresses: Array.from({ length: 15 }, (_, i) => serviceIP(`fd00:10:96::${(i + 1).toString(16)}`, 'default', `svc-${i}`)),
    family: 'IPv6',
    expected: { usable: 15n, used: 15n, free: 0n },
  },
  {
    name: 'an IPv6 /64 is the shortest the allocator takes addresses from',
    serviceCIDRs: [serviceCIDR('kubernetes', 'fd00:10:96::/64')],
    ipAddresses: [serviceIP('fd00:10:96::1', 'default', 'kubernetes')],
    family: 'IPv6',
    expected: { usable: 2n ** 64n - 1n, used: 1n, free: 2n ** 64n - 2n },
  },
  {
    name: 'no ranges of the family',
    serviceCIDRs: [serviceCIDR('kubernetes', '10.96.0.0/28')],
    ipAddresses: [],
    family: 'IPv6',
    expected: { usable: 0n, used: 0n, free: 0n },
  },
] as const

for (const testCase of cases) {
  t.test(testCase.name, (t) => {
    const state = cluster({ serviceCIDRs: testCase.serviceCIDRs, ipAddresses: testCase.ipAddresses })
    t.same(capacity(state, testCase.family), { family: testCase.family, ...testCase.expected })
    t.end()
  })
}
