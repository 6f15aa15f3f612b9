import t from 'tap'
import type { Family } from '../../../src/policy/ip.ts'
import { findFreePrefix, prefixLengthFor } from '../../../src/policy/plan.ts'
import type { PrefixBounds, ServiceCIDRRecord } from '../../../src/policy/types.ts'
import { cluster, policy, serviceCIDR, terminating, type PolicyFixture } from '../../support/fixtures.ts'

void t.test('prefixLengthFor: the longest prefix whose hostsPerNetwork holds the size', (t) => {
  const cases: { name: string, family: Family, size: bigint, bounds?: PrefixBounds, want: number | undefined }[] = [
    { name: 'IPv4, nothing to hold', family: 'IPv4', size: 0n, want: 32 },
    { name: 'IPv4, one address: a /31 holds none', family: 'IPv4', size: 1n, want: 30 },
    { name: 'IPv4, two addresses', family: 'IPv4', size: 2n, want: 30 },
    { name: 'IPv4, three addresses', family: 'IPv4', size: 3n, want: 29 },
    { name: 'IPv4, exactly a /24', family: 'IPv4', size: 254n, want: 24 },
    { name: 'IPv4, one more than a /24', family: 'IPv4', size: 255n, want: 23 },
    { name: 'IPv4, all of it', family: 'IPv4', size: 2n ** 32n - 2n, want: 0 },
    { name: 'IPv4, more than there is', family: 'IPv4', size: 2n ** 32n - 1n, want: undefined },
    { name: 'IPv6, nothing to hold', family: 'IPv6', size: 0n, want: 128 },
    { name: 'IPv6, one address: a /127', family: 'IPv6', size: 1n, want: 127 },
    { name: 'IPv6, exactly a /112', family: 'IPv6', size: 65535n, want: 112 },
    { name: 'IPv6, one more than a /112', family: 'IPv6', size: 65536n, want: 111 },
    { name: 'IPv6, the most a ServiceCIDR holds: a /64', family: 'IPv6', size: 2n ** 64n - 1n, want: 64 },
    { name: 'IPv6, more than the allocator counts', family: 'IPv6', size: 2n ** 64n, want: undefined },
    { name: 'widened to the policy maximum', family: 'IPv4', size: 10n, bounds: { min: 16, max: 24 }, want: 24 },
    { name: 'inside the bounds', family: 'IPv4', size: 1000n, bounds: { min: 16, max: 24 }, want: 22 },
    { name: 'exactly the policy minimum', family: 'IPv4', size: 65534n, bounds: { min: 16, max: 24 }, want: 16 },
    { name: 'larger than the policy minimum allows', family: 'IPv4', size: 65535n, bounds: { min: 16, max: 24 }, want: undefined },
    { name: 'IPv6 widened to the policy maximum', family: 'IPv6', size: 100n, bounds: { min: 64, max: 112 }, want: 112 },
    { name: 'IPv6 inside the bounds', family: 'IPv6', size: 100_000n, bounds: { min: 64, max: 112 }, want: 111 },
  ]
  for (const tc of cases) t.equal(prefixLengthFor(tc.family, tc.size, tc.bounds), tc.want, tc.name)
  t.end()
})

void t.test('findFreePrefix: the first aligned block that no obstacle touches', (t) => {
  const cases: {
    name: string
    policy: PolicyFixture
    existing?: ServiceCIDRRecord[]
    pending?: ServiceCIDRRecord[]
    family: Family
    bits: number
    want: string | undefined
  }[] = [
    { name: 'an empty allowed range: its first block', policy: { allowedRanges: ['10.96.0.0/16'] }, family: 'IPv4', bits: 24, want: '10.96.0.0/24' },
    { name: 'the block after an existing one', policy: { allowedRanges: ['10.96.0.0/16'] }, existing: [serviceCIDR('kubernetes', '10.96.0.0/24')], family: 'IPv4', bits: 24, want: '10.96.1.0/24' },
    {
      name: 'existing, pending and denied ranges are all obstacles',
      policy: { allowedRanges: ['10.96.0.0/16'], deniedRanges: ['10.96.2.0/23'] },
      existing: [serviceCIDR('kubernetes', '10.96.0.0/24')],
      pending: [serviceCIDR('just-admitted', '10.96.1.0/24')],
      family: 'IPv4',
      bits: 24,
      want: '10.96.4.0/24',
    },
    { name: 'a Terminating ServiceCIDR is an obstacle', policy: { allowedRanges: ['10.96.0.0/16'] }, existing: [terminating(serviceCIDR('old', '10.96.0.0/24'))], family: 'IPv4', bits: 24, want: '10.96.1.0/24' },
    { name: 'the block is aligned past a smaller obstacle', policy: { allowedRanges: ['10.96.0.0/16'] }, existing: [serviceCIDR('small', '10.96.0.0/28')], family: 'IPv4', bits: 24, want: '10.96.1.0/24' },
    { name: 'an obstacle in the middle of the first block', policy: { allowedRanges: ['10.96.0.0/22'] }, existing: [serviceCIDR('middle', '10.96.1.0/24')], family: 'IPv4', bits: 23, want: '10.96.2.0/23' },
    { name: 'an obstacle past the first block leaves it free', policy: { allowedRanges: ['10.96.0.0/16'] }, existing: [serviceCIDR('far', '10.96.5.0/24')], family: 'IPv4', bits: 24, want: '10.96.0.0/24' },
    {
      name: 'nested obstacles: the outer one decides',
      policy: { allowedRanges: ['10.96.0.0/15'] },
      existing: [serviceCIDR('outer', '10.96.0.0/16'), serviceCIDR('inner', '10.96.5.0/24')],
      family: 'IPv4',
      bits: 24,
      want: '10.97.0.0/24',
    },
    { name: 'the whole allowed range is taken', policy: { allowedRanges: ['10.96.0.0/24'] }, existing: [serviceCIDR('kubernetes', '10.96.0.0/24')], family: 'IPv4', bits: 24, want: undefined },
    {
      name: 'taken in pieces, with an obstacle beyond it',
      policy: { allowedRanges: ['10.96.0.0/24'] },
      existing: [serviceCIDR('low', '10.96.0.0/25'), serviceCIDR('high', '10.96.0.128/25'), serviceCIDR('beyond', '10.96.1.0/24')],
      family: 'IPv4',
      bits: 25,
      want: undefined,
    },
    { name: 'a block larger than the allowed range', policy: { allowedRanges: ['10.96.0.0/24'] }, family: 'IPv4', bits: 23, want: undefined },
    { name: 'at the very top of the address space', policy: { allowedRanges: ['255.255.255.0/24'] }, existing: [serviceCIDR('low', '255.255.255.0/25')], family: 'IPv4', bits: 25, want: '255.255.255.128/25' },
    { name: 'nothing left at the very top', policy: { allowedRanges: ['255.255.255.0/24'] }, existing: [serviceCIDR('all', '255.255.255.0/24')], family: 'IPv4', bits: 25, want: undefined },
    {
      name: 'allowed ranges in policy order: the second has room',
      policy: { allowedRanges: ['10.96.0.0/24', '10.200.0.0/16', '10.100.0.0/16'] },
      existing: [serviceCIDR('kubernetes', '10.96.0.0/24')],
      family: 'IPv4',
      bits: 24,
      want: '10.200.0.0/24',
    },
    { name: 'ranges of the other family are neither space nor obstacle', policy: { allowedRanges: ['10.96.0.0/16', 'fd00::/108'] }, existing: [serviceCIDR('kubernetes', '10.96.0.0/16', 'fd00::/112')], family: 'IPv6', bits: 112, want: 'fd00::1:0/112' },
    { name: 'no allowed range of the family', policy: { allowedRanges: ['10.96.0.0/16'] }, family: 'IPv6', bits: 112, want: undefined },
    { name: 'an empty allowedRanges allows nowhere', policy: { allowedRanges: [] }, family: 'IPv4', bits: 24, want: undefined },
    { name: 'no allowedRanges: the private ranges, 10/8 first', policy: {}, family: 'IPv4', bits: 24, want: '10.0.0.0/24' },
    { name: 'no allowedRanges: 172.16/12 when 10/8 is taken', policy: {}, existing: [serviceCIDR('big', '10.0.0.0/8')], family: 'IPv4', bits: 24, want: '172.16.0.0/24' },
    { name: 'no allowedRanges: a /12 fits nowhere once 10/8 and 172.16/12 are taken', policy: {}, existing: [serviceCIDR('a', '10.0.0.0/8'), serviceCIDR('b', '172.16.0.0/12')], family: 'IPv4', bits: 12, want: undefined },
    { name: 'no allowedRanges: fd00::/8 for IPv6', policy: {}, existing: [serviceCIDR('kubernetes', 'fd00::/64')], family: 'IPv6', bits: 64, want: 'fd00:0:0:1::/64' },
    { name: 'no allowedRanges: never public space', policy: {}, family: 'IPv4', bits: 7, want: undefined },
    { name: 'shorter than the policy minimum', policy: { allowedRanges: ['10.0.0.0/8'], prefixLength: { IPv4: { min: 16, max: 24 } } }, family: 'IPv4', bits: 15, want: undefined },
    { name: 'longer than the policy maximum', policy: { allowedRanges: ['10.0.0.0/8'], prefixLength: { IPv4: { min: 16, max: 24 } } }, family: 'IPv4', bits: 25, want: undefined },
    { name: 'within the policy bounds', policy: { allowedRanges: ['10.0.0.0/8'], prefixLength: { IPv4: { min: 16, max: 24 } } }, family: 'IPv4', bits: 16, want: '10.0.0.0/16' },
    { name: 'bounds of the other family do not apply', policy: { allowedRanges: ['10.0.0.0/8'], prefixLength: { IPv6: { min: 64, max: 64 } } }, family: 'IPv4', bits: 28, want: '10.0.0.0/28' },
    { name: 'longer than the family allows', policy: {}, family: 'IPv4', bits: 33, want: undefined },
  ]
  for (const tc of cases) {
    const view = cluster({ serviceCIDRs: tc.existing ?? [], pending: tc.pending ?? [] })
    t.equal(findFreePrefix(policy(tc.policy), view, tc.family, tc.bits)?.text, tc.want, tc.name)
  }
  t.end()
})
