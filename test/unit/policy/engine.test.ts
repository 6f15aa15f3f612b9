import t from 'tap'
import { decide } from '../../../src/policy/engine.ts'
import type { Bypass, ReviewRequest, RuleName } from '../../../src/policy/types.ts'
import {
  admin,
  apiserver,
  cluster,
  create,
  ipAddress,
  policy,
  remove,
  serviceCIDR,
  serviceIP,
  terminating,
  update,
  type ClusterFixture,
  type PolicyFixture,
} from '../../support/fixtures.ts'

// A cluster in the shape most of the table uses: the default ServiceCIDR, dual-stack, and an
// "extra" range whose addresses Services still hold.
const base: ClusterFixture = {
  serviceCIDRs: [
    serviceCIDR('kubernetes', '10.96.0.0/16', 'fd00:10:96::/112'),
    serviceCIDR('extra', '10.100.0.0/24'),
    terminating(serviceCIDR('leaving', '10.101.0.0/24')),
  ],
  ipAddresses: [
    serviceIP('10.96.0.1', 'default', 'kubernetes'),
    serviceIP('10.96.0.10', 'kube-system', 'kube-dns'),
    serviceIP('fd00:10:96::a', 'kube-system', 'kube-dns'),
    serviceIP('10.100.0.6', 'team-a', 'api'),
    serviceIP('10.100.0.5', 'team-a', 'web'),
  ],
}

// The policy most of the table uses.
const guarded: PolicyFixture = {
  allowedRanges: ['10.96.0.0/12', 'fd00:10::/32'],
  deniedRanges: ['10.104.0.0/16'],
  prefixLength: { IPv4: { min: 16, max: 28 } },
}

interface Case {
  name: string
  policy?: PolicyFixture
  /** The cluster as the view shows it; 'unsynced' passes no view, as before the watches synced. */
  cluster?: ClusterFixture | 'unsynced'
  request: ReviewRequest
  allowed: boolean
  /** [rule, field] of every violation, in order. */
  violations?: [RuleName, string][]
  /** Fragments the deny message must hold; an allowed request has no message. */
  message?: (string | RegExp)[]
  /** Fragments the message must not hold. */
  notInMessage?: string[]
  warnings?: (string | RegExp)[]
  bypass?: Bypass
  cidrs?: string[]
}

const cases: Case[] = [
  // CREATE: where a range may lie.
  {
    name: 'CREATE inside allowedRanges, overlapping nothing',
    request: create('team-b', ['10.102.0.0/24']),
    allowed: true,
    cidrs: ['10.102.0.0/24'],
  },
  {
    name: 'CREATE outside allowedRanges, with a free range suggested',
    request: create('team-b', ['10.200.0.0/24']),
    allowed: false,
    violations: [['AllowedRanges', 'spec.cidrs[0]']],
    message: [
      'ServiceCIDR "team-b" is not allowed by the servicecidr-guard policy: spec.cidrs[0] 10.200.0.0/24 is outside the allowed IPv4 ranges (10.96.0.0/12). 10.97.0.0/24 is free and the policy admits it.',
    ],
    cidrs: ['10.200.0.0/24'],
  },
  {
    name: 'CREATE of a family the policy allows nowhere',
    policy: { allowedRanges: ['10.96.0.0/12'] },
    request: create('v6', ['fd00:20::/112']),
    allowed: false,
    violations: [['AllowedRanges', 'spec.cidrs[0]']],
    message: ['spec.cidrs[0] fd00:20::/112 is an IPv6 range, and the policy allows no IPv6 ranges', 'No free IPv6 /112 is left that the policy admits; ask the platform team for more room.'],
  },
  {
    name: 'CREATE of a range containing an allowed range is still outside it',
    policy: { allowedRanges: ['10.96.0.0/12'], overlap: 'Allow' },
    request: create('wider', ['10.96.0.0/11']),
    allowed: false,
    violations: [['AllowedRanges', 'spec.cidrs[0]']],
  },
  {
    name: 'CREATE overlapping a denied range',
    request: create('pods', ['10.104.16.0/20']),
    allowed: false,
    violations: [['DeniedRanges', 'spec.cidrs[0]']],
    message: ['spec.cidrs[0] 10.104.16.0/20 overlaps the denied range 10.104.0.0/16', '10.97.0.0/20 is free'],
  },
  {
    name: 'CREATE over several denied ranges',
    policy: { deniedRanges: ['10.104.0.0/16', '10.105.0.0/16'] },
    request: create('wide', ['10.104.0.0/15']),
    allowed: false,
    violations: [['DeniedRanges', 'spec.cidrs[0]']],
    message: ['overlaps the denied ranges 10.104.0.0/16, 10.105.0.0/16'],
  },
  {
    name: 'CREATE with a prefix shorter than the policy minimum',
    request: create('huge', ['10.96.0.0/12']),
    allowed: false,
    violations: [['DeniedRanges', 'spec.cidrs[0]'], ['PrefixLength', 'spec.cidrs[0]'], ['Overlap', 'spec.cidrs[0]']],
    message: ['spec.cidrs[0] 10.96.0.0/12 is too large: the policy allows IPv4 prefixes from /16 to /28', '10.97.0.0/16 is free'],
  },
  {
    name: 'CREATE with a prefix longer than the policy maximum',
    request: create('tiny', ['10.102.0.0/29']),
    allowed: false,
    violations: [['PrefixLength', 'spec.cidrs[0]']],
    message: ['spec.cidrs[0] 10.102.0.0/29 is too small: the policy allows IPv4 prefixes from /16 to /28', '10.97.0.0/28 is free'],
  },
  {
    name: 'CREATE at both prefix bounds',
    request: create('bounds', ['10.102.0.0/16']),
    allowed: true,
  },

  // CREATE: overlap, in each mode.
  {
    name: 'Deny: overlap with an existing ServiceCIDR',
    request: create('clash', ['10.96.128.0/24']),
    allowed: false,
    violations: [['Overlap', 'spec.cidrs[0]']],
    message: ['spec.cidrs[0] 10.96.128.0/24 overlaps ServiceCIDR "kubernetes" (10.96.0.0/16)', '10.97.0.0/24 is free'],
    notInMessage: ['strictly contain'],
  },
  {
    name: 'Deny: even strictly containing an existing ServiceCIDR',
    request: create('bigger', ['10.100.0.0/16']),
    allowed: false,
    violations: [['Overlap', 'spec.cidrs[0]']],
    message: ['overlaps ServiceCIDR "extra" (10.100.0.0/24)'],
  },
  {
    name: 'Deny: a Terminating ServiceCIDR still counts',
    request: create('reuse', ['10.101.0.0/24']),
    allowed: false,
    violations: [['Overlap', 'spec.cidrs[0]']],
    message: ['overlaps ServiceCIDR "leaving" (10.101.0.0/24, Terminating)'],
  },
  {
    name: 'Deny: a ServiceCIDR admitted moments ago counts',
    cluster: { ...base, pending: [serviceCIDR('racer', '10.102.0.0/24')] },
    request: create('second', ['10.102.0.0/23']),
    allowed: false,
    violations: [['Overlap', 'spec.cidrs[0]']],
    message: ['overlaps ServiceCIDR "racer" (10.102.0.0/24, admitted moments ago)'],
  },
  {
    name: 'Deny: a CREATE retried under the same name does not clash with its own reservation',
    cluster: { ...base, pending: [serviceCIDR('retry', '10.102.0.0/24')] },
    request: create('retry', ['10.102.0.0/24']),
    allowed: true,
  },
  {
    name: 'Deny: overlap with many ServiceCIDRs lists three and counts the rest',
    policy: { ...guarded, prefixLength: {} },
    cluster: { serviceCIDRs: ['10.102.0.0/28', '10.102.0.16/28', '10.102.0.32/28', '10.102.0.48/28', '10.102.0.64/28'].map((cidr, i) => serviceCIDR(`small-${i}`, cidr)) },
    request: create('cover', ['10.102.0.0/24']),
    allowed: false,
    violations: [['Overlap', 'spec.cidrs[0]']],
    message: ['overlaps ServiceCIDRs "small-0" (10.102.0.0/28), "small-1" (10.102.0.16/28), "small-2" (10.102.0.32/28) and 2 more'],
  },
  {
    name: 'AllowExpansion: strictly containing existing ranges is allowed',
    policy: { ...guarded, overlap: 'AllowExpansion' },
    request: create('bigger', ['10.100.0.0/16']),
    allowed: true,
  },
  {
    name: 'AllowExpansion: an identical range is refused',
    policy: { ...guarded, overlap: 'AllowExpansion' },
    request: create('twin', ['10.100.0.0/24']),
    allowed: false,
    violations: [['Overlap', 'spec.cidrs[0]']],
    message: ['overlaps ServiceCIDR "extra" (10.100.0.0/24) (a new range may only strictly contain existing ones)'],
  },
  {
    name: 'AllowExpansion: a range inside an existing one is refused',
    policy: { ...guarded, overlap: 'AllowExpansion' },
    request: create('inside', ['10.96.5.0/24']),
    allowed: false,
    violations: [['Overlap', 'spec.cidrs[0]']],
    message: ['overlaps ServiceCIDR "kubernetes" (10.96.0.0/16) (a new range may only strictly contain existing ones)'],
  },
  {
    name: 'Allow: Kubernetes\' own behaviour, even an identical range',
    policy: { ...guarded, overlap: 'Allow' },
    request: create('twin', ['10.100.0.0/24']),
    allowed: true,
  },

  // CREATE: dual-stack, each family on its own.
  {
    name: 'dual-stack CREATE, both families fine',
    request: create('dual', ['10.102.0.0/24', 'fd00:10:102::/112']),
    allowed: true,
    cidrs: ['10.102.0.0/24', 'fd00:10:102::/112'],
  },
  {
    name: 'dual-stack CREATE, only the IPv6 range outside the policy',
    request: create('dual', ['10.102.0.0/24', 'fd00:20::/112']),
    allowed: false,
    violations: [['AllowedRanges', 'spec.cidrs[1]']],
    message: ['spec.cidrs[1] fd00:20::/112 is outside the allowed IPv6 ranges (fd00:10::/32)', 'fd00:10::/112 is free'],
    notInMessage: ['spec.cidrs[0]'],
  },
  {
    name: 'dual-stack CREATE, the IPv6 range overlapping kubernetes\'',
    request: create('dual', ['10.102.0.0/24', 'fd00:10:96::/120']),
    allowed: false,
    violations: [['Overlap', 'spec.cidrs[1]']],
    message: ['spec.cidrs[1] fd00:10:96::/120 overlaps ServiceCIDR "kubernetes" (fd00:10:96::/112)', 'fd00:10::/120 is free'],
  },
  {
    // NewIPAllocator refuses IPv6 ServiceCIDRs shorter than /64: a free /48 would allocate nothing.
    name: 'an IPv6 range shorter than /64 is answered with a free /64, never a range the allocator refuses',
    request: create('wide', ['fd00:10:96::/48']),
    allowed: false,
    violations: [['Overlap', 'spec.cidrs[0]']],
    message: ['spec.cidrs[0] fd00:10:96::/48 overlaps ServiceCIDR "kubernetes" (fd00:10:96::/112)', 'fd00:10::/64 is free'],
  },
  {
    name: 'two CIDRs of one family',
    request: create('double', ['10.102.0.0/24', '10.103.0.0/24']),
    allowed: false,
    violations: [['ValidCIDR', 'spec.cidrs']],
    message: ['spec.cidrs: Invalid value: may specify no more than one IP for each IP family'],
  },

  // CREATE: every violation is collected, in rule order, and the suggestion follows the first fixable CIDR.
  {
    name: 'every violation of every CIDR is reported',
    request: create('everything', ['10.104.0.0/29', 'fd00:20::/112']),
    policy: { ...guarded, allowedRanges: ['10.96.0.0/12'] },
    cluster: { serviceCIDRs: [serviceCIDR('pods', '10.104.0.0/24')] },
    allowed: false,
    violations: [
      ['AllowedRanges', 'spec.cidrs[1]'],
      ['DeniedRanges', 'spec.cidrs[0]'],
      ['PrefixLength', 'spec.cidrs[0]'],
      ['Overlap', 'spec.cidrs[0]'],
    ],
    message: [
      'spec.cidrs[1] fd00:20::/112 is an IPv6 range, and the policy allows no IPv6 ranges; spec.cidrs[0] 10.104.0.0/29 overlaps the denied range 10.104.0.0/16; spec.cidrs[0] 10.104.0.0/29 is too small: the policy allows IPv4 prefixes from /16 to /28; spec.cidrs[0] 10.104.0.0/29 overlaps ServiceCIDR "pods" (10.104.0.0/24). 10.96.0.0/28 is free and the policy admits it.',
    ],
  },
  {
    name: 'an invalid CIDR is reported and checked no further; no suggestion for it',
    request: create('typo', ['10.102.0.1/24']),
    allowed: false,
    violations: [['ValidCIDR', 'spec.cidrs[0]']],
    message: ['spec.cidrs[0]: Invalid value: "10.102.0.1/24": must not have bits set beyond the prefix length.'],
    notInMessage: ['is free'],
  },
  {
    name: 'CREATE without an object',
    request: { ...create('ghost', []), object: undefined },
    allowed: false,
    violations: [['ValidCIDR', 'object']],
    message: ['the request carries no object'],
  },
  {
    name: 'CREATE with no CIDRs',
    request: create('empty', []),
    allowed: false,
    violations: [['ValidCIDR', 'spec.cidrs']],
    message: ['spec.cidrs: Required value: at least one CIDR required'],
  },

  // UPDATE.
  {
    name: 'UPDATE that only changes metadata (finalizers, labels)',
    request: update('extra', ['10.100.0.0/24'], ['10.100.0.0/24']),
    allowed: true,
    bypass: 'MetadataOnly',
    cidrs: [],
  },
  {
    name: 'metadata-only UPDATE of a range the policy would now refuse',
    request: update('legacy', ['192.168.0.0/24'], ['192.168.0.0/24']),
    allowed: true,
    bypass: 'MetadataOnly',
  },
  {
    name: 'metadata-only UPDATE before the cache synced: kube-controller-manager\'s finalizer patch must pass',
    cluster: 'unsynced',
    request: update('extra', ['10.100.0.0/24'], ['10.100.0.0/24']),
    allowed: true,
    bypass: 'MetadataOnly',
  },
  {
    name: 'UPDATE adding the second family: only the added CIDR is checked',
    request: update('legacy', ['192.168.0.0/24'], ['192.168.0.0/24', 'fd00:10:1::/112']),
    allowed: true,
    cidrs: ['fd00:10:1::/112'],
  },
  {
    name: 'UPDATE adding a second family that breaks the policy',
    request: update('extra', ['10.100.0.0/24'], ['10.100.0.0/24', 'fd00:10:96::/120']),
    allowed: false,
    violations: [['Overlap', 'spec.cidrs[1]']],
    message: ['ServiceCIDR "extra" is not allowed', 'spec.cidrs[1] fd00:10:96::/120 overlaps ServiceCIDR "kubernetes" (fd00:10:96::/112)'],
    cidrs: ['fd00:10:96::/120'],
  },
  {
    name: 'UPDATE adding the second family never overlaps its own old version',
    cluster: { serviceCIDRs: [serviceCIDR('extra', '10.100.0.0/24', 'fd00:10:100::/112')] },
    request: update('extra', ['10.100.0.0/24'], ['10.100.0.0/24', 'fd00:10:100::/112']),
    allowed: true,
  },
  {
    name: 'UPDATE adding a CIDR of the family it already has',
    request: update('extra', ['10.100.0.0/24'], ['10.100.0.0/24', '10.102.0.0/24']),
    allowed: false,
    violations: [['ValidCIDR', 'spec.cidrs']],
  },
  {
    // ValidateServiceCIDRUpdate validates the whole new spec when a second CIDR is added: the same
    // CIDR twice is two of one family. Found comparing with upstream: it was "MetadataOnly".
    name: 'UPDATE repeating its only CIDR is refused, not a metadata-only update',
    request: update('extra', ['10.100.0.0/24'], ['10.100.0.0/24', '10.100.0.0/24']),
    allowed: false,
    violations: [['ValidCIDR', 'spec.cidrs']],
    message: ['spec.cidrs: Invalid value: may specify no more than one IP for each IP family'],
    cidrs: ['10.100.0.0/24'],
  },
  {
    name: 'UPDATE adding a CIDR before the cache synced fails closed',
    cluster: 'unsynced',
    request: update('extra', ['10.100.0.0/24'], ['10.100.0.0/24', 'fd00:10:100::/112']),
    allowed: false,
    violations: [['ClusterStateUnknown', 'spec.cidrs']],
    message: ['has not finished reading the cluster\'s ServiceCIDRs and IPAddresses', 'retry in a few seconds'],
    notInMessage: ['is free'],
  },
  {
    name: 'UPDATE without an oldObject',
    request: { ...update('extra', [], ['10.100.0.0/24']), oldObject: undefined },
    allowed: false,
    violations: [['ValidCIDR', 'object']],
    message: ['the UPDATE request carries no object or no oldObject'],
  },

  {
    // The allocator takes no addresses from an IPv6 prefix shorter than /64: bounds that end short
    // of it leave nothing to suggest, and the hint says why, not that the room ran out.
    name: 'CREATE overlapping, under IPv6 prefix bounds that end short of /64',
    policy: { allowedRanges: ['fd00:10::/32'], prefixLength: { IPv6: { min: 48, max: 56 } } },
    request: create('wide', ['fd00:10:96::/56']),
    allowed: false,
    violations: [['Overlap', 'spec.cidrs[0]']],
    message: ['The policy admits IPv6 prefixes of /48 to /56 only, all shorter than the /64 kube-apiserver\'s allocator takes addresses from; ask the platform team to admit /64 or longer.'],
    notInMessage: ['No free IPv6'],
    cidrs: ['fd00:10:96::/56'],
  },

  // DELETE.
  {
    name: 'DELETE while Services hold addresses only this range covers',
    request: remove('extra', ['10.100.0.0/24']),
    allowed: false,
    violations: [['InUse', 'metadata.name']],
    message: [
      `Deleting ServiceCIDR "extra" is not allowed by the servicecidr-guard policy: ServiceCIDR "extra" still has 2 allocated addresses that no other ServiceCIDR covers: Service team-a/web (10.100.0.5), Service team-a/api (10.100.0.6). Move them off it first: delete those Services and re-create them once the range is gone (no ServiceCIDR can cover them instead: it would overlap this one, which the policy's overlap: Deny refuses); then delete again. Until then Kubernetes would keep the ServiceCIDR Terminating.`,
    ],
    cidrs: ['10.100.0.0/24'],
  },
  {
    // A ServiceCIDR covering the addresses overlaps this one (ContainsPrefix): under
    // AllowExpansion only a strictly wider one is admitted, so the message asks for that.
    name: 'DELETE while Services hold addresses only this range covers, under AllowExpansion',
    policy: { overlap: 'AllowExpansion' },
    request: remove('extra', ['10.100.0.0/24']),
    allowed: false,
    violations: [['InUse', 'metadata.name']],
    message: ['delete those Services (and re-create them once the range is gone), or create a ServiceCIDR that strictly contains 10.100.0.0/24 (a shorter prefix: the policy admits an overlap only as such an expansion); then delete again.'],
    cidrs: ['10.100.0.0/24'],
  },
  {
    name: 'DELETE while Services hold addresses only this range covers, under overlap: Allow',
    policy: { overlap: 'Allow' },
    request: remove('extra', ['10.100.0.0/24']),
    allowed: false,
    violations: [['InUse', 'metadata.name']],
    message: ['delete those Services (and re-create them once the range is gone), or create a ServiceCIDR that covers 10.100.0.0/24; then delete again.'],
    cidrs: ['10.100.0.0/24'],
  },
  {
    name: 'DELETE blocked by one address',
    cluster: { serviceCIDRs: [serviceCIDR('extra', '10.100.0.0/24')], ipAddresses: [serviceIP('10.100.0.5', 'team-a', 'web')] },
    request: remove('extra', ['10.100.0.0/24']),
    allowed: false,
    violations: [['InUse', 'metadata.name']],
    message: ['still has 1 allocated address that no other ServiceCIDR covers: Service team-a/web (10.100.0.5). '],
  },
  {
    name: 'DELETE blocked by many addresses names five and counts the rest',
    cluster: { serviceCIDRs: [serviceCIDR('extra', '10.100.0.0/24')], ipAddresses: Array.from({ length: 12 }, (_, i) => serviceIP(`10.100.0.${20 - i}`, 'team-a', `svc-${20 - i}`)) },
    request: remove('extra', ['10.100.0.0/24']),
    allowed: false,
    violations: [['InUse', 'metadata.name']],
    message: ['still has 12 allocated addresses', 'Service team-a/svc-9 (10.100.0.9), Service team-a/svc-10 (10.100.0.10), Service team-a/svc-11 (10.100.0.11), Service team-a/svc-12 (10.100.0.12), Service team-a/svc-13 (10.100.0.13) and 7 more.'],
  },
  {
    name: 'DELETE blocked by addresses held by something other than a Service',
    cluster: {
      serviceCIDRs: [serviceCIDR('extra', '10.100.0.0/24', 'fd00:10:100::/112')],
      ipAddresses: [
        ipAddress('10.100.0.5'),
        ipAddress('10.100.0.6', { parentRef: { group: 'gateway.networking.k8s.io', resource: 'gateways', namespace: 'infra', name: 'edge' } }),
        ipAddress('10.100.0.7', { parentRef: { group: 'example.com', resource: 'widgets', namespace: '', name: 'w1' } }),
        ipAddress('fd00:10:100::8', { parentRef: { group: '', resource: 'nodes', name: 'node-1' } }),
      ],
    },
    request: remove('extra', ['10.100.0.0/24', 'fd00:10:100::/112']),
    allowed: false,
    violations: [['InUse', 'metadata.name']],
    policy: { overlap: 'Allow' },
    message: ['IPAddress 10.100.0.5, gateways.gateway.networking.k8s.io infra/edge (10.100.0.6), widgets.example.com w1 (10.100.0.7), nodes node-1 (fd00:10:100::8).', 'covers 10.100.0.0/24 and fd00:10:100::/112'],
  },
  {
    name: 'DELETE of a range another ServiceCIDR covers',
    cluster: { ...base, serviceCIDRs: [...base.serviceCIDRs!, serviceCIDR('wide', '10.100.0.0/16')] },
    request: remove('extra', ['10.100.0.0/24']),
    allowed: true,
    cidrs: ['10.100.0.0/24'],
  },
  {
    name: 'DELETE of an unused range',
    request: remove('leaving', ['10.101.0.0/24']),
    allowed: true,
  },
  {
    name: 'DELETE in use, with deletion.requireUnused off',
    policy: { ...guarded, requireUnused: false },
    request: remove('extra', ['10.100.0.0/24']),
    allowed: true,
  },
  {
    name: 'DELETE of a protected name',
    policy: { ...guarded, protectedNames: ['kubernetes', 'leaving'] },
    request: remove('leaving', ['10.101.0.0/24']),
    allowed: false,
    violations: [['ProtectedName', 'metadata.name']],
    message: ['ServiceCIDR "leaving" is protected by the policy (spec.protectedNames) and may not be deleted'],
  },
  {
    name: 'DELETE of a protected name in use: both reported',
    policy: { ...guarded, protectedNames: ['extra'] },
    request: remove('extra', ['10.100.0.0/24']),
    allowed: false,
    violations: [['ProtectedName', 'metadata.name'], ['InUse', 'metadata.name']],
  },
  {
    name: 'DELETE of "kubernetes" by system:apiserver is checked like any other',
    request: remove('kubernetes', ['10.96.0.0/16', 'fd00:10:96::/112'], apiserver),
    allowed: false,
    violations: [['InUse', 'metadata.name']],
    message: ['still has 3 allocated addresses'],
  },
  {
    // kube-apiserver re-creates Service default/kubernetes at its range's first address: deleting
    // the Services is no way off the default range while the flag names it.
    name: 'DELETE of "kubernetes" in use: the flag is the way off it, not deleting Services',
    request: remove('kubernetes', ['10.96.0.0/16', 'fd00:10:96::/112']),
    allowed: false,
    violations: [['InUse', 'metadata.name']],
    message: ['Move them off it first: change --service-cluster-ip-range on every kube-apiserver to a range another ServiceCIDR holds (this is kube-apiserver\'s default ServiceCIDR, made from that flag, and it re-creates Service default/kubernetes in it), then delete the Services left in 10.96.0.0/16 and fd00:10:96::/112; then delete again.'],
    notInMessage: ['re-create them once the range is gone'],
  },
  {
    // `kubectl delete servicecidr leaving extra`, where "leaving" covers what "extra" holds:
    // each would count the other as its parent and both would go, orphaning the addresses.
    name: 'DELETE in use, where only a Terminating ServiceCIDR covers the addresses: named, and not counted',
    cluster: { ...base, serviceCIDRs: [serviceCIDR('kubernetes', '10.96.0.0/16'), serviceCIDR('extra', '10.100.0.0/24'), terminating(serviceCIDR('leaving', '10.100.0.0/16'))] },
    request: remove('extra', ['10.100.0.0/24']),
    allowed: false,
    violations: [['InUse', 'metadata.name']],
    message: ['no other ServiceCIDR covers: Service team-a/web (10.100.0.5), Service team-a/api (10.100.0.6) (ServiceCIDR "leaving" is being deleted too, so it does not count). Move them off it first'],
  },
  {
    name: 'DELETE in use, where two Terminating ServiceCIDRs cover the addresses: both named',
    cluster: { ...base, serviceCIDRs: [serviceCIDR('kubernetes', '10.96.0.0/16'), serviceCIDR('extra', '10.100.0.0/24'), terminating(serviceCIDR('leaving', '10.100.0.0/16')), terminating(serviceCIDR('going', '10.100.0.0/25'))] },
    request: remove('extra', ['10.100.0.0/24']),
    allowed: false,
    violations: [['InUse', 'metadata.name']],
    message: ['Service team-a/api (10.100.0.6) (ServiceCIDR "leaving", "going" are being deleted too, so they do not count). Move them off it first'],
  },
  {
    name: 'DELETE before the cache synced fails closed',
    cluster: 'unsynced',
    request: remove('leaving', ['10.101.0.0/24']),
    allowed: false,
    violations: [['ClusterStateUnknown', 'metadata.name']],
    message: ['has not finished reading'],
  },
  {
    name: 'DELETE before the cache synced, with requireUnused off, needs no state',
    policy: { ...guarded, requireUnused: false },
    cluster: 'unsynced',
    request: remove('leaving', ['10.101.0.0/24']),
    allowed: true,
  },
  {
    name: 'DELETE of a protected name before the cache synced: both reported',
    policy: { ...guarded, protectedNames: ['leaving'] },
    cluster: 'unsynced',
    request: remove('leaving', ['10.101.0.0/24']),
    allowed: false,
    violations: [['ProtectedName', 'metadata.name'], ['ClusterStateUnknown', 'metadata.name']],
  },
  {
    name: 'DELETE without an oldObject falls back to the cache',
    request: remove('extra', undefined),
    allowed: false,
    violations: [['InUse', 'metadata.name']],
    cidrs: ['10.100.0.0/24'],
  },
  {
    name: 'DELETE without an oldObject of a ServiceCIDR the cache does not hold',
    request: remove('unknown', undefined),
    allowed: false,
    violations: [['ClusterStateUnknown', 'oldObject']],
    message: ['the DELETE request carries no oldObject with a valid CIDR and the ServiceCIDR is not in the cache'],
  },
  {
    name: 'DELETE whose oldObject has no CIDRs falls back to the cache',
    request: remove('extra', []),
    allowed: false,
    violations: [['InUse', 'metadata.name']],
    cidrs: ['10.100.0.0/24'],
  },
  {
    name: 'DELETE whose oldObject has no CIDR that parses falls back to the cache',
    request: remove('extra', ['not-a-cidr']),
    allowed: false,
    violations: [['InUse', 'metadata.name']],
    cidrs: ['10.100.0.0/24'],
  },
  {
    name: 'DELETE whose oldObject has no CIDRs, of a ServiceCIDR the cache does not hold',
    request: remove('unknown', []),
    allowed: false,
    violations: [['ClusterStateUnknown', 'oldObject']],
    message: ['the DELETE request carries no oldObject with a valid CIDR'],
  },
  {
    name: 'DELETE without an oldObject before the cache synced',
    cluster: 'unsynced',
    request: remove('extra', undefined),
    allowed: false,
    violations: [['ClusterStateUnknown', 'oldObject']],
    message: ['has not finished reading'],
  },

  // CREATE before the cache synced.
  {
    name: 'CREATE before the cache synced fails closed, without a suggestion',
    cluster: 'unsynced',
    request: create('team-b', ['10.102.0.0/24']),
    allowed: false,
    violations: [['ClusterStateUnknown', 'spec.cidrs']],
    notInMessage: ['is free'],
  },
  {
    name: 'CREATE before the cache synced still reports what needs no state',
    cluster: 'unsynced',
    request: create('team-b', ['10.200.0.0/24']),
    allowed: false,
    violations: [['AllowedRanges', 'spec.cidrs[0]'], ['ClusterStateUnknown', 'spec.cidrs']],
    notInMessage: ['is free'],
  },
  {
    name: 'CREATE before the cache synced, with overlap Allow, needs no state',
    policy: { ...guarded, overlap: 'Allow' },
    cluster: 'unsynced',
    request: create('team-b', ['10.102.0.0/24']),
    allowed: true,
  },
  {
    name: 'an invalid CREATE before the cache synced is refused for what it is',
    cluster: 'unsynced',
    request: create('typo', ['10.102.0.1/24']),
    allowed: false,
    violations: [['ValidCIDR', 'spec.cidrs[0]']],
  },

  // kube-apiserver's own default ServiceCIDR.
  {
    name: 'system:apiserver creating "kubernetes" before the cache synced',
    cluster: 'unsynced',
    request: create('kubernetes', ['10.0.0.0/24'], apiserver),
    allowed: true,
    bypass: 'ApiserverDefault',
    cidrs: ['10.0.0.0/24'],
  },
  {
    name: 'system:apiserver creating "kubernetes" outside every policy rule',
    request: create('kubernetes', ['10.104.0.0/29'], apiserver),
    allowed: true,
    bypass: 'ApiserverDefault',
  },
  {
    name: 'system:apiserver updating "kubernetes" before the cache synced',
    cluster: 'unsynced',
    request: update('kubernetes', ['10.96.0.0/16'], ['10.96.0.0/16', 'fd00:99::/112'], apiserver),
    allowed: true,
    bypass: 'ApiserverDefault',
  },
  {
    name: 'system:apiserver creating another name is checked',
    request: create('not-default', ['10.200.0.0/24'], apiserver),
    allowed: false,
    violations: [['AllowedRanges', 'spec.cidrs[0]']],
  },
  {
    name: 'someone else creating "kubernetes" is checked',
    request: create('kubernetes', ['10.200.0.0/24'], admin),
    allowed: false,
    violations: [['AllowedRanges', 'spec.cidrs[0]']],
  },

  // Exemptions.
  {
    name: 'an exempt user',
    policy: { ...guarded, exemptions: { usernames: ['platform-bot'] } },
    request: create('anywhere', ['192.168.0.0/24'], { username: 'platform-bot', groups: ['system:authenticated'] }),
    allowed: true,
    bypass: 'Exempt',
    cidrs: ['192.168.0.0/24'],
  },
  {
    name: 'an exempt group',
    policy: { ...guarded, exemptions: { groups: ['platform-admins'] } },
    cluster: 'unsynced',
    request: remove('extra', ['10.100.0.0/24'], { username: 'alice', groups: ['system:authenticated', 'platform-admins'] }),
    allowed: true,
    bypass: 'Exempt',
    cidrs: ['10.100.0.0/24'],
  },
  {
    name: 'a user whose name is an exempt group is not exempt',
    policy: { ...guarded, exemptions: { groups: ['platform-admins'] } },
    request: create('anywhere', ['192.168.0.0/24'], { username: 'platform-admins', groups: [] }),
    allowed: false,
    violations: [['AllowedRanges', 'spec.cidrs[0]']],
  },

  // Enforcement.
  {
    name: 'Warn: allowed, one warning a violation',
    policy: { ...guarded, enforcement: 'Warn' },
    request: create('team-b', ['10.200.0.0/24', 'fd00:20::/112']),
    allowed: true,
    violations: [['AllowedRanges', 'spec.cidrs[0]'], ['AllowedRanges', 'spec.cidrs[1]']],
    warnings: [
      'servicecidr-guard (Warn): spec.cidrs[0] 10.200.0.0/24 is outside the allowed IPv4 ranges (10.96.0.0/12)',
      'servicecidr-guard (Warn): spec.cidrs[1] fd00:20::/112 is outside the allowed IPv6 ranges (fd00:10::/32)',
    ],
  },
  {
    name: 'Warn: before the cache synced, allowed with a warning',
    policy: { ...guarded, enforcement: 'Warn' },
    cluster: 'unsynced',
    request: remove('extra', ['10.100.0.0/24']),
    allowed: true,
    violations: [['ClusterStateUnknown', 'metadata.name']],
    warnings: [/^servicecidr-guard \(Warn\): servicecidr-guard has not finished reading/],
  },
  {
    // ValidateServiceCIDR checks metadata.name (a DNS subdomain) before the spec; kubectl apply
    // would be refused, so an offline check must not say admitted, whatever the enforcement.
    name: 'a CREATE named as kube-apiserver never names one is refused, even under Warn',
    policy: { ...guarded, enforcement: 'Warn' },
    request: create('Team_B', ['10.200.0.0/24']),
    allowed: false,
    violations: [['ValidName', 'metadata.name'], ['AllowedRanges', 'spec.cidrs[0]']],
    message: ['ServiceCIDR "Team_B" is not allowed by the servicecidr-guard policy: metadata.name: Invalid value: "Team_B": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters'],
  },
  {
    name: 'an UPDATE is not refused for its name: it cannot change',
    request: update('Legacy_Range', ['10.100.0.0/24'], ['10.100.0.0/24']),
    allowed: true,
    bypass: 'MetadataOnly',
  },
  {
    name: 'Audit: allowed, no warnings, violations reported',
    policy: { ...guarded, enforcement: 'Audit' },
    request: remove('extra', ['10.100.0.0/24']),
    allowed: true,
    violations: [['InUse', 'metadata.name']],
    warnings: [],
  },

  // Nothing to check.
  {
    name: 'CONNECT',
    request: { ...create('x', []), operation: 'CONNECT', object: undefined },
    allowed: true,
    bypass: 'NothingToCheck',
    cidrs: [],
  },
]

void t.test('decide', (t) => {
  for (const tc of cases) {
    const view = tc.cluster === 'unsynced' ? undefined : cluster(tc.cluster ?? base)
    const decision = decide(policy(tc.policy ?? guarded), view, tc.request)
    void t.test(tc.name, (t) => {
      t.equal(decision.allowed, tc.allowed, 'allowed')
      t.same(decision.violations.map((violation) => [violation.rule, violation.field]), tc.violations ?? [], 'violations')
      if (decision.allowed) t.equal(decision.message, '', 'an allowed request carries no message')
      for (const fragment of tc.message ?? []) t.match(decision.message, fragment, 'message')
      for (const fragment of tc.notInMessage ?? []) t.notMatch(decision.message, fragment, 'message')
      if (tc.warnings !== undefined) t.match(decision.warnings, tc.warnings, 'warnings')
      t.equal(decision.warnings.length, tc.warnings?.length ?? 0, 'as many warnings as expected')
      t.equal(decision.bypass, tc.bypass, 'bypass')
      if (tc.cidrs !== undefined) t.same(decision.cidrs, tc.cidrs, 'cidrs')
      t.end()
    })
  }
  t.end()
})

void t.test('decide reads its arguments and nothing else', (t) => {
  const view = cluster(base)
  const request = create('clash', ['10.96.128.0/24'])
  t.same(decide(policy(guarded), view, request), decide(policy(guarded), view, request), 'the same answer twice')
  t.equal(view.serviceCIDRCount, 3, 'the view is not changed')
  t.same([...view.pendingServiceCIDRs()], [], 'no reservation is made by deciding')
  t.end()
})
