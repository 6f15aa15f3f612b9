// audit -o policyreport (a wgpolicyk8s.io/v1alpha2 ClusterPolicyReport), --apply, and -o junit for
// check and audit: the exact shapes CI systems and Policy Reporter read.

import { loadAll } from 'js-yaml'
import t from 'tap'
import { ClusterAccessError, type ClusterTarget } from '../../../src/cli/io.ts'
import { clusterPolicyReport, type ClusterPolicyReport } from '../../../src/cli/policy-report.ts'
import { parsePolicy } from '../../../src/config/policy.ts'
import { auditCluster } from '../../../src/policy/audit.ts'
import { ClusterState, toIPAddressRecord, toServiceCIDRRecord } from '../../../src/policy/state.ts'
import { fixture, run, testNow } from '../../helpers/cli.ts'

const audit = ['audit', '--policy', fixture.gkePolicy, '--cluster', fixture.auditCluster]

const row = (result: ClusterPolicyReport['results'][number]): string =>
  `${result.resources[0]?.kind ?? ''} ${result.resources[0]?.name ?? ''} ${result.rule} ${result.result} ${result.severity}`

t.test('-o policyreport: one ClusterPolicyReport, a result per ServiceCIDR and rule, one per orphan', async (t) => {
  const { code, stdout } = await run([...audit, '-o', 'policyreport'])
  t.equal(code, 1, 'findings: exit 1, as the text report')
  const documents = loadAll(stdout) as ClusterPolicyReport[]
  t.equal(documents.length, 1)
  const [report] = documents
  if (report === undefined) return
  t.equal(report.apiVersion, 'wgpolicyk8s.io/v1alpha2')
  t.equal(report.kind, 'ClusterPolicyReport')
  t.strictSame(report.metadata, { name: 'servicecidr-guard', labels: { 'app.kubernetes.io/managed-by': 'servicecidr-guard' } })
  t.strictSame(report.summary, { pass: 13, fail: 8, warn: 0, error: 0, skip: 1 })
  t.strictSame(report.results.map(row), [
    'ServiceCIDR draining AllowedRanges pass high',
    'ServiceCIDR draining PrefixLength pass low',
    'ServiceCIDR draining Overlap pass medium',
    'ServiceCIDR extra-a AllowedRanges pass high',
    'ServiceCIDR extra-a PrefixLength pass low',
    'ServiceCIDR extra-a Overlap fail medium',
    'ServiceCIDR kubernetes ApiserverDefault skip low',
    'ServiceCIDR legacy AllowedRanges fail high',
    'ServiceCIDR legacy PrefixLength pass low',
    'ServiceCIDR legacy Overlap pass medium',
    'ServiceCIDR overlap-b AllowedRanges pass high',
    'ServiceCIDR overlap-b PrefixLength pass low',
    'ServiceCIDR overlap-b Overlap fail medium',
    'ServiceCIDR tiny AllowedRanges pass high',
    'ServiceCIDR tiny PrefixLength fail low',
    'ServiceCIDR tiny Overlap pass medium',
    'ServiceCIDR v6 AllowedRanges fail high',
    'ServiceCIDR v6 PrefixLength pass low',
    'ServiceCIDR v6 Overlap pass medium',
    'IPAddress 34.118.228.0 OrphanedIPAddress fail medium',
    'IPAddress 34.118.240.5 OrphanedIPAddress fail medium',
    'IPAddress fd00:20::1 OrphanedIPAddress fail medium',
  ])
  const legacy = report.results.find((result) => result.resources[0]?.name === 'legacy' && result.rule === 'AllowedRanges')
  t.strictSame(legacy, {
    policy: 'servicecidr-guard',
    rule: 'AllowedRanges',
    result: 'fail',
    severity: 'high',
    message: 'spec.cidrs[0] 10.100.0.0/24 is outside the allowed IPv4 ranges (34.118.224.0/20)',
    resources: [{ apiVersion: 'networking.k8s.io/v1', kind: 'ServiceCIDR', name: 'legacy' }],
    properties: { cidrs: '10.100.0.0/24', utilisation: '10.100.0.0/24: 1 of 254 usable addresses (0.4%)' },
    category: 'Service IP ranges',
    source: 'servicecidr-guard',
    scored: true,
    timestamp: { seconds: testNow.getTime() / 1000, nanos: 0 },
  }, 'every field Policy Reporter reads')
  const draining = report.results.find((result) => result.resources[0]?.name === 'draining')
  t.equal(draining?.properties?.['terminating'], 'true', 'a Terminating ServiceCIDR says so')
  const orphan = report.results.find((result) => result.rule === 'OrphanedIPAddress')
  t.equal(orphan?.message, 'Service shop/stray (34.118.228.0) lies in no ServiceCIDR: create a ServiceCIDR that contains 34.118.228.0, or re-create the Service')
})

t.test('under enforcement Warn a violation is a warn result, not a fail; an exemption is a skip', (t) => {
  const cluster = new ClusterState()
  cluster.replaceServiceCIDRs([toServiceCIDRRecord({ metadata: { name: 'outside' }, spec: { cidrs: ['10.0.0.0/24'] } })!])
  const warn = parsePolicy('apiVersion: servicecidr-guard/v1alpha1\nkind: Policy\nspec: {allowedRanges: [10.96.0.0/12], overlap: Allow, enforcement: Warn}\n', 'p')
  const warned = clusterPolicyReport(warn, auditCluster(warn, cluster, { username: 'u', groups: [] }), testNow)
  t.strictSame(warned.results.map(row), ['ServiceCIDR outside AllowedRanges warn high'])
  t.strictSame(warned.summary, { pass: 0, fail: 0, warn: 1, error: 0, skip: 0 })
  const exempt = parsePolicy('apiVersion: servicecidr-guard/v1alpha1\nkind: Policy\nspec: {allowedRanges: [10.96.0.0/12], exemptions: {usernames: [u]}}\n', 'p')
  const skipped = clusterPolicyReport(exempt, auditCluster(exempt, cluster, { username: 'u', groups: [] }), testNow, 'prod')
  t.strictSame(skipped.results.map(row), ['ServiceCIDR outside Exempt skip low'])
  t.strictSame(skipped.metadata.annotations, { 'servicecidr-guard.dev/context': 'prod' }, 'a fleet report names its context')
  t.end()
})

t.test('a report too large for one object keeps its failures and drops its passes, and says so', (t) => {
  const cluster = new ClusterState()
  cluster.replaceServiceCIDRs(Array.from({ length: 2000 }, (_, index) =>
    toServiceCIDRRecord({ metadata: { name: `range-${String(index).padStart(4, '0')}` }, spec: { cidrs: [`10.${String(100 + (index >> 8))}.${String(index & 255)}.0/24`] } })!))
  const policy = parsePolicy('apiVersion: servicecidr-guard/v1alpha1\nkind: Policy\nspec: {allowedRanges: [10.100.0.0/16], prefixLength: {ipv4: {min: 16, max: 28}}}\n', 'p')
  const report = clusterPolicyReport(policy, auditCluster(policy, cluster, { username: 'u', groups: [] }), testNow)
  t.strictSame(report.summary, { pass: 3 * 2000 - 1744, fail: 1744, warn: 0, error: 0, skip: 0 }, 'the summary counts every result')
  t.ok(report.results.every((result) => result.result === 'fail'), 'only failures are listed')
  t.equal(report.results.length, 1744)
  t.strictSame(report.metadata.annotations, { 'servicecidr-guard.dev/omitted-pass-results': String(3 * 2000 - 1744) })
  t.ok(JSON.stringify(report).length < 1.5 * 2 ** 20, 'under etcd\'s object limit')
  t.end()
})

t.test('a report whose failures alone are too large keeps what fits, the ServiceCIDRs\' first, and says how many it left out', (t) => {
  // 8,000 orphaned IPAddresses: ~3.6 MB of failures, more than twice etcd's object limit.
  const cluster = new ClusterState()
  cluster.replaceServiceCIDRs([toServiceCIDRRecord({ metadata: { name: 'outside' }, spec: { cidrs: ['192.168.0.0/24'] } })!])
  cluster.replaceIPAddresses(Array.from({ length: 8000 }, (_, index) => toIPAddressRecord({
    metadata: { name: `10.${String(index >> 16)}.${String((index >> 8) & 255)}.${String(index & 255)}`, labels: { 'ipaddress.kubernetes.io/ip-family': 'IPv4', 'ipaddress.kubernetes.io/managed-by': 'ipallocator.k8s.io' } },
    spec: { parentRef: { group: '', resource: 'services', namespace: 'team-a', name: `svc-${String(index)}` } },
  })!))
  const policy = parsePolicy('apiVersion: servicecidr-guard/v1alpha1\nkind: Policy\nspec: {allowedRanges: [10.96.0.0/12]}\n', 'p')
  const report = clusterPolicyReport(policy, auditCluster(policy, cluster, { username: 'u', groups: [] }), testNow)
  t.equal(report.summary.fail, 8001, 'the summary counts every failure')
  t.equal(report.results[0]?.rule, 'AllowedRanges', 'the ServiceCIDR\'s failure is kept first')
  const omitted = Number(report.metadata.annotations?.['servicecidr-guard.dev/omitted-results'])
  const { fail, warn, error, skip } = report.summary
  t.ok(omitted > 0 && report.results.length + omitted === fail + warn + error + skip, `${String(omitted)} left out, counted`)
  t.ok(JSON.stringify(report.results).length <= 2 ** 20, 'the results fit the 1 MiB budget')
  t.ok(JSON.stringify(report).length < 1.5 * 2 ** 20, 'under etcd\'s object limit')
  t.end()
})

t.test('--apply writes the report to the cluster and exits 0 whatever it found', async (t) => {
  const live = (): Promise<ClusterState> => {
    const cluster = new ClusterState()
    cluster.replaceServiceCIDRs([toServiceCIDRRecord({ metadata: { name: 'legacy' }, spec: { cidrs: ['10.100.0.0/24'] } })!])
    return Promise.resolve(cluster)
  }
  const applied = await run(['audit', '--policy', fixture.gkePolicy, '-o', 'policyreport', '--apply'], { live })
  t.equal(applied.code, 0)
  t.equal(applied.stdout, 'ClusterPolicyReport servicecidr-guard applied (2 pass, 1 fail, 0 warn, 0 error, 0 skip)\n')
  t.equal(applied.applied.length, 1)
  t.strictSame((applied.applied[0]?.report as ClusterPolicyReport).summary, { pass: 2, fail: 1, warn: 0, error: 0, skip: 0 })
  t.equal(applied.applied[0]?.target.context, undefined, 'to the cluster it read')

  const refused = await run(['audit', '--policy', fixture.gkePolicy, '-o', 'policyreport', '--apply'], {
    live,
    apply: () => Promise.reject(new ClusterAccessError('https://k: HTTP 403: clusterpolicyreports.wgpolicyk8s.io "servicecidr-guard" is forbidden')),
  })
  t.equal(refused.code, 2)
  t.equal(refused.stderr, 'servicecidr-guard: the cluster was audited, but the report could not be applied: https://k: HTTP 403: clusterpolicyreports.wgpolicyk8s.io "servicecidr-guard" is forbidden\n')

  const fleet = await run(['audit', '--policy', fixture.gkePolicy, '-o', 'policyreport', '--apply', '--context', 'a', '--context', 'b'], {
    live,
    contexts: [{ name: 'a', server: 'https://a' }, { name: 'b', server: 'https://b' }],
    apply: (target: ClusterTarget) => (target.context === 'b' ? Promise.reject(new ClusterAccessError('https://b: HTTP 404: the server could not find the requested resource')) : Promise.resolve()),
  })
  t.equal(fleet.code, 3, 'a cluster whose report could not be applied')
  t.equal(fleet.stdout, [
    'a: ClusterPolicyReport servicecidr-guard applied (2 pass, 1 fail, 0 warn, 0 error, 0 skip)',
    'b: ERROR audited, but the report could not be applied: https://b: HTTP 404: the server could not find the requested resource',
    '',
  ].join('\n'))
  const printed = await run(['audit', '--policy', fixture.gkePolicy, '-o', 'policyreport', '--context', 'a', '--context', 'b'], { live, contexts: [{ name: 'a', server: 'https://a' }, { name: 'b', server: 'https://b' }] })
  t.strictSame((loadAll(printed.stdout) as ClusterPolicyReport[]).map((report) => report.metadata.annotations), [{ 'servicecidr-guard.dev/context': 'a' }, { 'servicecidr-guard.dev/context': 'b' }], 'without --apply, one report per context')

  const notReport = await run(['audit', '--policy', fixture.gkePolicy, '--apply'], { live })
  t.equal(notReport.code, 2)
  t.equal(notReport.stderr, 'servicecidr-guard: --apply writes a ClusterPolicyReport: use it with -o policyreport\n')
  const files = await run([...audit, '-o', 'policyreport', '--apply'])
  t.equal(files.code, 2, '--apply with --cluster files')
})

t.test('check -o junit: a test case a request, a denial its failure, with the file', async (t) => {
  const { code, stdout } = await run(['check', '--policy', fixture.gkePolicy, '--cluster', fixture.gkeCluster, fixture.manifest('multi.yaml'), '--delete', 'extra-a', '-o', 'junit'])
  t.equal(code, 1)
  t.match(stdout, /^<\?xml version="1\.0" encoding="UTF-8"\?>\n<testsuites name="servicecidr-guard check" tests="\d+" failures="\d+" errors="0" skipped="0">\n {2}<testsuite name="servicecidr-guard check as servicecidr-guard:check"/)
  t.match(stdout, '    <testcase classname="test/fixtures/manifests/multi.yaml" name="CREATE ServiceCIDR &quot;extra-c&quot; 34.118.230.0/24 (test/fixtures/manifests/multi.yaml, document 1)" file="test/fixtures/manifests/multi.yaml"/>\n')
  t.match(stdout, / {4}<testcase classname="--delete" name="DELETE ServiceCIDR &quot;extra-a&quot; 34\.118\.228\.0\/24">\n {6}<failure type="InUse" message="Deleting ServiceCIDR &quot;extra-a&quot; is not allowed by the servicecidr-guard policy: ServiceCIDR &quot;extra-a&quot; still has 2 allocated addresses/)
  t.end()
})

t.test('audit -o junit: a test case a ServiceCIDR and an orphan; a fleet\'s unreadable cluster is an error', async (t) => {
  const single = await run([...audit, '-o', 'junit'])
  t.equal(single.code, 1)
  t.match(single.stdout, '<testsuites name="servicecidr-guard audit" tests="10" failures="8" errors="0" skipped="1">')
  t.match(single.stdout, '  <testsuite name="servicecidr-guard audit as servicecidr-guard:audit" tests="10" failures="8" errors="0" skipped="1" timestamp="2026-11-30T12:00:00">')
  t.match(single.stdout, '    <testcase classname="IPAddress" name="IPAddress fd00:20::1">\n      <failure type="OrphanedIPAddress" message="Service shop/ghost-v6 (fd00:20::1) lies in no ServiceCIDR">')
  t.match(single.stdout, '    <testcase classname="ServiceCIDR" name="ServiceCIDR &quot;kubernetes&quot; 34.118.224.0/22">\n      <skipped message="exempt: kube-apiserver&apos;s default ServiceCIDR (from --service-cluster-ip-range)"/>')
  const fleet = await run(['audit', '--policy', fixture.gkePolicy, '--all-contexts', '-o', 'junit'], {
    contexts: [{ name: 'gone', server: 'https://127.0.0.1:1' }],
    live: () => Promise.reject(new ClusterAccessError('https://127.0.0.1:1: cannot connect: ECONNREFUSED <&>')),
  })
  t.equal(fleet.code, 3)
  t.match(fleet.stdout, '  <testsuite name="gone" tests="1" failures="0" errors="1" skipped="0" timestamp="2026-11-30T12:00:00">\n    <testcase classname="cluster" name="read https://127.0.0.1:1">\n      <error type="ClusterAccessError" message="https://127.0.0.1:1: cannot connect: ECONNREFUSED &lt;&amp;&gt;"/>')
})
