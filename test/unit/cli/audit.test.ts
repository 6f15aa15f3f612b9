// `audit`: the pure report (src/policy/audit.ts) over small states, and the command in-process over
// the fixtures, offline (--cluster) and with a stand-in for the live read.

import t from 'tap'
import { ClusterAccessError } from '../../../src/cli/io.ts'
import { parsePolicy } from '../../../src/config/policy.ts'
import { auditCluster, utilisation, viewWithout } from '../../../src/policy/audit.ts'
import { parseCIDR, type Prefix } from '../../../src/policy/ip.ts'
import { ClusterState, toIPAddressRecord, toServiceCIDRRecord } from '../../../src/policy/state.ts'
import { fixture, run } from '../../helpers/cli.ts'

const user = { username: 'servicecidr-guard:audit', groups: [] }
const policy = (spec: string) => parsePolicy(`apiVersion: servicecidr-guard/v1alpha1\nkind: Policy\nspec: ${spec}\n`, 'test')
const prefix = (text: string): Prefix => {
  const parsed = parseCIDR(text)
  if (!parsed.ok) throw new Error(parsed.error)
  return parsed.value
}

function state(serviceCIDRs: Record<string, string[]>, addresses: string[], unmanaged: string[] = []): ClusterState {
  const cluster = new ClusterState()
  cluster.replaceServiceCIDRs(Object.entries(serviceCIDRs).map(([name, cidrs]) => toServiceCIDRRecord({ metadata: { name }, spec: { cidrs } })!))
  const labels = (ip: string, managedBy: string) => ({
    'ipaddress.kubernetes.io/ip-family': ip.includes(':') ? 'IPv6' : 'IPv4',
    'ipaddress.kubernetes.io/managed-by': managedBy,
  })
  cluster.replaceIPAddresses([
    ...addresses.map((ip) => toIPAddressRecord({ metadata: { name: ip, labels: labels(ip, 'ipallocator.k8s.io') } })!),
    ...unmanaged.map((ip) => toIPAddressRecord({ metadata: { name: ip, labels: labels(ip, 'example.com/static') } })!),
  ])
  return cluster
}

t.test('orphans: addresses no ServiceCIDR contains, network and IPv4 broadcast addresses included', (t) => {
  const cluster = state(
    { a: ['10.0.0.0/24'], b: ['10.0.1.0/24', 'fd00::/120'] },
    ['10.0.0.0', '10.0.0.1', '10.0.0.255', '10.0.1.7', '10.0.2.1', '9.255.255.255', 'fd00::', 'fd00::ff', 'fd00::100'],
    ['10.9.9.9'],
  )
  const report = auditCluster(policy('{overlap: Allow}'), cluster, user)
  // 10.0.0.0 and 10.0.0.255 are a's network and broadcast addresses; fd00:: is b's network
  // address, but its IPv6 all-ones address fd00::ff is contained. 10.9.9.9 is not allocator-managed.
  t.strictSame(report.orphans.map((address) => address.name), ['9.255.255.255', '10.0.0.0', '10.0.0.255', '10.0.2.1', 'fd00::', 'fd00::100'])
  t.end()
})

t.test('orphans: overlapping and nested ServiceCIDRs cover the union of their ranges', (t) => {
  const cluster = state({ big: ['10.0.0.0/16'], small: ['10.0.5.0/24'], next: ['10.1.0.0/24'] }, ['10.0.5.0', '10.0.255.255', '10.1.0.0', '10.1.0.9'])
  const report = auditCluster(policy('{overlap: Allow}'), cluster, user)
  t.strictSame(report.orphans.map((address) => address.name), ['10.0.255.255', '10.1.0.0'])
  t.end()
})

t.test('utilisation counts allocator-managed addresses in the allocatable range, percent to one decimal', (t) => {
  const cluster = state({}, ['10.0.0.0', '10.0.0.1', '10.0.0.2', '10.0.0.255', 'fd00::1'], ['10.0.0.3'])
  t.strictSame(utilisation(cluster, prefix('10.0.0.0/24')), { cidr: prefix('10.0.0.0/24'), inUse: 2, usable: 254n, percent: 0.8 })
  t.strictSame(utilisation(cluster, prefix('10.0.0.0/30')), { cidr: prefix('10.0.0.0/30'), inUse: 2, usable: 2n, percent: 100 })
  t.strictSame(utilisation(cluster, prefix('10.0.0.0/31')), { cidr: prefix('10.0.0.0/31'), inUse: 0, usable: 0n, percent: undefined })
  t.strictSame(utilisation(cluster, prefix('10.0.0.0/29')), { cidr: prefix('10.0.0.0/29'), inUse: 2, usable: 6n, percent: 33.3 })
  t.equal(utilisation(cluster, prefix('fd00::/64')).percent, 0, 'a tiny share of an IPv6 /64 rounds to 0.0')
  t.equal(utilisation(cluster, prefix('fd00::/64')).usable, (1n << 64n) - 1n)
  // NewIPAllocator refuses IPv6 ServiceCIDRs shorter than /64: they exist, and allocate nothing.
  t.strictSame(utilisation(cluster, prefix('fd00::/48')), { cidr: prefix('fd00::/48'), inUse: 1, usable: 0n, percent: undefined })
  // Rounded to the nearest tenth (an exact half cannot occur: usable sizes are 2^n - 1 or 2^n - 2).
  const one = (ip: string, cidr: string): number | undefined => utilisation(state({}, [ip]), prefix(cidr)).percent
  t.equal(one('10.0.0.1', '10.0.0.0/29'), 16.7)
  t.equal(one('10.0.0.1', '10.0.0.0/28'), 7.1)
  t.equal(one('10.0.0.1', '10.0.0.0/25'), 0.8)
  t.equal(one('fd00::1', 'fd00::/125'), 14.3)
  t.equal(one('fd00::1', 'fd00::/124'), 6.7)
  t.equal(one('fd00::1', 'fd00::/126'), 33.3)
  t.equal(one('fd00::1', 'fd00::/127'), 100)
  t.end()
})

t.test('each ServiceCIDR is reviewed as a CREATE against the others; the apiserver default is exempt', (t) => {
  const cluster = state({ kubernetes: ['10.96.0.0/16'], inside: ['10.96.4.0/24'], elsewhere: ['10.200.0.0/24'] }, ['10.96.0.1', '10.96.4.4'])
  const report = auditCluster(policy('{allowedRanges: [10.200.0.0/16], overlap: Deny}'), cluster, user)
  t.strictSame(report.serviceCIDRs.map(({ record, decision }) => [record.name, decision.allowed, decision.bypass, decision.violations.map((violation) => violation.rule)]), [
    ['elsewhere', true, undefined, []],
    ['inside', false, undefined, ['AllowedRanges', 'Overlap']],
    ['kubernetes', true, 'ApiserverDefault', []],
  ])
  t.strictSame(report.serviceCIDRs.map(({ utilisation: used }) => used.map(({ inUse }) => inUse)), [[0], [1], [2]], 'the default still reports its utilisation (10.96.4.4 is in both)')
  t.end()
})

t.test('AllowExpansion: of a range and one it strictly contains, only the contained one is flagged', (t) => {
  const report = auditCluster(policy('{overlap: AllowExpansion}'), state({ wide: ['10.0.0.0/16'], narrow: ['10.0.1.0/24'] }, []), user)
  t.strictSame(report.serviceCIDRs.map(({ record, decision }) => [record.name, decision.allowed]), [['narrow', false], ['wide', true]])
  t.end()
})

t.test('viewWithout hides one ServiceCIDR and nothing else', (t) => {
  const cluster = state({ a: ['10.0.0.0/24'], b: ['10.0.1.0/24'] }, ['10.0.0.5'])
  const view = viewWithout(cluster, 'a')
  t.strictSame([...view.serviceCIDRs()].map((record) => record.name), ['b'])
  t.equal(view.serviceCIDR('a'), undefined)
  t.equal(view.serviceCIDR('b')?.name, 'b')
  t.equal(view.addressesBetween('IPv4', 0n, (1n << 32n) - 1n).length, 1)
  t.strictSame([...view.pendingServiceCIDRs()], [])
  t.equal(view.pendingServiceCIDRHolding('a', ['10.0.0.0/24']), undefined)
  t.end()
})

const auditFixture = ['audit', '--policy', fixture.gkePolicy, '--cluster', fixture.auditCluster]

t.test('audit over a dump: overlaps among existing, out-of-policy ranges, orphans, utilisation', async (t) => {
  const { code, stdout, stderr } = await run(auditFixture)
  t.equal(code, 1)
  t.equal(stderr, '')
  t.equal(stdout, [
    'ADMITTED ServiceCIDR "draining" 34.118.238.0/24 (Terminating)',
    '  in use: 34.118.238.0/24: 1 of 254 usable addresses (0.4%)',
    '',
    'DENIED ServiceCIDR "extra-a" 34.118.228.0/24',
    '  - Overlap: spec.cidrs[0] 34.118.228.0/24 overlaps ServiceCIDR "overlap-b" (34.118.228.0/25)',
    '  in use: 34.118.228.0/24: 2 of 254 usable addresses (0.8%)',
    '',
    'EXEMPT ServiceCIDR "kubernetes" 34.118.224.0/22',
    '  exempt: kube-apiserver\'s default ServiceCIDR (from --service-cluster-ip-range)',
    '  in use: 34.118.224.0/22: 2 of 1022 usable addresses (0.2%)',
    '',
    'DENIED ServiceCIDR "legacy" 10.100.0.0/24',
    '  - AllowedRanges: spec.cidrs[0] 10.100.0.0/24 is outside the allowed IPv4 ranges (34.118.224.0/20)',
    '  in use: 10.100.0.0/24: 1 of 254 usable addresses (0.4%)',
    '',
    'DENIED ServiceCIDR "overlap-b" 34.118.228.0/25',
    '  - Overlap: spec.cidrs[0] 34.118.228.0/25 overlaps ServiceCIDR "extra-a" (34.118.228.0/24)',
    '  in use: 34.118.228.0/25: 2 of 126 usable addresses (1.6%)',
    '',
    'DENIED ServiceCIDR "tiny" 34.118.237.0/29',
    '  - PrefixLength: spec.cidrs[0] 34.118.237.0/29 is too small: the policy allows IPv4 prefixes from /20 to /28',
    '  in use: 34.118.237.0/29: 0 of 6 usable addresses (0.0%)',
    '',
    'DENIED ServiceCIDR "v6" fd00:10::/112',
    '  - AllowedRanges: spec.cidrs[0] fd00:10::/112 is an IPv6 range, and the policy allows no IPv6 ranges',
    '  in use: fd00:10::/112: 1 of 65535 usable addresses (0.0%)',
    '',
    'ORPHANED 3 IPAddresses in no ServiceCIDR:',
    '  - Service shop/stray (34.118.228.0)',
    '  - Service shop/ghost (34.118.240.5)',
    '  - Service shop/ghost-v6 (fd00:20::1)',
    '',
    '7 ServiceCIDRs audited as if created now by servicecidr-guard:audit: 5 would be denied; 3 orphaned IPAddresses',
    '',
  ].join('\n'))
})

t.test('audit -o json', async (t) => {
  const { code, stdout } = await run([...auditFixture, '-o', 'json'])
  t.equal(code, 1)
  const entry = (name: string, cidr: string, fields: Record<string, unknown>, used: [number, string, number]) => ({
    name,
    cidrs: [cidr],
    terminating: false,
    allowed: false,
    bypass: null,
    violations: [],
    ...fields,
    utilisation: [{ cidr, family: cidr.includes(':') ? 'IPv6' : 'IPv4', inUse: used[0], usable: used[1], percent: used[2] }],
  })
  const violation = (rule: string, message: string) => ({ violations: [{ rule, field: 'spec.cidrs[0]', message }] })
  const orphan = (name: string, service: string) => ({
    name,
    family: name.includes(':') ? 'IPv6' : 'IPv4',
    parentRef: { group: '', resource: 'services', namespace: 'shop', name: service },
  })
  t.strictSame(JSON.parse(stdout), {
    apiVersion: 'servicecidr-guard/v1alpha1',
    kind: 'AuditReport',
    user: { username: 'servicecidr-guard:audit', groups: [] },
    serviceCIDRs: [
      entry('draining', '34.118.238.0/24', { terminating: true, allowed: true }, [1, '254', 0.4]),
      entry('extra-a', '34.118.228.0/24', violation('Overlap', 'spec.cidrs[0] 34.118.228.0/24 overlaps ServiceCIDR "overlap-b" (34.118.228.0/25)'), [2, '254', 0.8]),
      entry('kubernetes', '34.118.224.0/22', { allowed: true, bypass: 'ApiserverDefault' }, [2, '1022', 0.2]),
      entry('legacy', '10.100.0.0/24', violation('AllowedRanges', 'spec.cidrs[0] 10.100.0.0/24 is outside the allowed IPv4 ranges (34.118.224.0/20)'), [1, '254', 0.4]),
      entry('overlap-b', '34.118.228.0/25', violation('Overlap', 'spec.cidrs[0] 34.118.228.0/25 overlaps ServiceCIDR "extra-a" (34.118.228.0/24)'), [2, '126', 1.6]),
      entry('tiny', '34.118.237.0/29', violation('PrefixLength', 'spec.cidrs[0] 34.118.237.0/29 is too small: the policy allows IPv4 prefixes from /20 to /28'), [0, '6', 0]),
      entry('v6', 'fd00:10::/112', violation('AllowedRanges', 'spec.cidrs[0] fd00:10::/112 is an IPv6 range, and the policy allows no IPv6 ranges'), [1, '65535', 0]),
    ],
    orphans: [orphan('34.118.228.0', 'stray'), orphan('34.118.240.5', 'ghost'), orphan('fd00:20::1', 'ghost-v6')],
    summary: { serviceCIDRs: 7, denied: 5, orphans: 3 },
  })
})

t.test('a clean cluster audits with exit 0', async (t) => {
  const { code, stdout } = await run(['audit', '--policy', fixture.gkePolicy, '--cluster', fixture.gkeCluster])
  t.equal(code, 0)
  t.match(stdout, /\n3 ServiceCIDRs audited as if created now by servicecidr-guard:audit: 0 would be denied; 0 orphaned IPAddresses\n$/)
})

t.test('without --cluster, audit reads the live cluster through the kubeconfig given', async (t) => {
  const live = state({ kubernetes: ['10.96.0.0/28'], extra: ['10.96.1.0/24'] }, ['10.96.0.1', '10.97.0.1'])
  const { code, stdout, liveReads } = await run(['audit', '--policy', fixture.genericPolicy, '--kubeconfig', '/tmp/kubeconfig', '-o', 'json'], { live: () => Promise.resolve(live) })
  t.equal(code, 1, 'an orphan is a finding')
  t.strictSame(liveReads, [{ kubeconfig: '/tmp/kubeconfig', context: undefined, timeoutMs: 30_000 }], 'the current context, with the default deadline')
  const report = JSON.parse(stdout) as { serviceCIDRs: { name: string, allowed: boolean }[], orphans: { name: string }[] }
  t.strictSame(report.serviceCIDRs.map(({ name, allowed }) => [name, allowed]), [['extra', true], ['kubernetes', true]])
  t.strictSame(report.orphans.map(({ name }) => name), ['10.97.0.1'])
  const defaulted = await run(['audit', '--policy', fixture.genericPolicy], { live: () => Promise.resolve(live) })
  t.strictSame(defaulted.liveReads.map((target) => target.kubeconfig), [undefined], 'no --kubeconfig: the default kubeconfig')
})

t.test('audit errors exit 2', async (t) => {
  const unreachable = await run(['audit', '--policy', fixture.gkePolicy], { live: () => Promise.reject(new ClusterAccessError('https://127.0.0.1:6443: cannot connect: ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:6443')) })
  t.equal(unreachable.code, 2)
  t.equal(unreachable.stderr, 'servicecidr-guard: cannot read the cluster: https://127.0.0.1:6443: cannot connect: ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:6443\n')
  const both = await run([...auditFixture, '--kubeconfig', 'k'])
  t.equal(both.code, 2)
  t.equal(both.stderr, 'servicecidr-guard: --cluster reads files, and --kubeconfig, --context, --all-contexts and --apply a live cluster: give one or the other\n')
  t.strictSame(both.liveReads, [])
  const badPolicy = await run(['audit', '--policy', fixture.invalidPolicy, '--cluster', fixture.gkeCluster])
  t.equal(badPolicy.code, 2)
  t.match(badPolicy.stderr, /^servicecidr-guard: invalid policy test\/fixtures\/policies\/invalid\.yaml:\n/)
  const badCluster = await run(['audit', '--policy', fixture.gkePolicy, '--cluster', fixture.invalidCluster])
  t.equal(badCluster.code, 2)
  t.match(badCluster.stderr, 'invalid-cidr.yaml, document 1, items[1]: ServiceCIDR "sloppy"')
  const unknown = await run([...auditFixture, '--delete', 'x'])
  t.equal(unknown.code, 2)
  t.match(unknown.stderr, "error: unknown option '--delete'")
})

t.test('audit --help', async (t) => {
  const { code, stdout } = await run(['audit', '--help'])
  t.equal(code, 0)
  t.match(stdout, 'Usage: servicecidr-guard audit [options]')
  t.match(stdout, '--as-group <group>')
  t.match(stdout, 'reported as exempt')
})
