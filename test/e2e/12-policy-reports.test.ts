// `servicecidr-guard audit -o policyreport --apply` against the real apiserver, as the CronJob of
// config/policy-reports runs it: as a ServiceAccount holding exactly that component's ClusterRole,
// it writes the ClusterPolicyReport servicecidr-guard (its CRD: the one Policy Reporter reads; a
// test copy is installed when the cluster has none), with a fail result for a range outside the
// policy; the next run replaces the report whole; and without `create` the first write is refused,
// so the role holds nothing it does not need.
//
// Ranges: 34.118.235.0/24 (in policy), 10.202.0.0/24 (out of policy, let in under Audit).

import { load } from 'js-yaml'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { baselinePolicyPath } from './harness/index.ts'
import { cli, ensureBuilt } from './lib/cli.ts'
import { removeIdentities, serviceAccountToken, setRules, writeKubeconfig, type PolicyRule } from './lib/identities.ts'
import { serviceCIDRObject } from './lib/kube.ts'
import { repoRoot } from './lib/paths.ts'
import { policyWith } from './lib/policy.ts'
import { begin, finish } from './lib/setup.ts'
import { poll } from './lib/wait.ts'

const context = await begin(t, import.meta.url, 'policy-report')
const { cluster, harness, file, spec } = context
const scratch = mkdtempSync(join(tmpdir(), 'servicecidr-guard-e2e-reports-'))
t.teardown(() => {
  rmSync(scratch, { recursive: true, force: true })
})
const kubeconfig = join(scratch, 'kubeconfig')
const crdName = 'clusterpolicyreports.wgpolicyk8s.io'
const crdPath = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crdName}`
const reportPath = '/apis/wgpolicyk8s.io/v1alpha2/clusterpolicyreports/servicecidr-guard'
const account = 'e2e-policy-report-audit'
const inPolicy = { name: 'e2e-report-in-policy', cidr: '34.118.235.0/24' }
const outside = { name: 'e2e-report-outside', cidr: '10.202.0.0/24' }
/** The rules of config/policy-reports/role.yaml, exactly. */
const componentRules = (load(readFileSync(join(repoRoot, 'config/policy-reports/role.yaml'), 'utf8')) as { rules: PolicyRule[] }).rules
let createdCRD = false

interface Report {
  metadata: { managedFields?: { manager: string, operation: string }[] }
  summary: Record<string, number>
  results: { rule: string, result: string, message: string, resources: { kind: string, name: string }[] }[]
}

async function report(): Promise<Report | undefined> {
  const answer = await cluster.rawJSON('GET', reportPath)
  return answer.status === 404 ? undefined : answer.body as Report
}

const apply = (): ReturnType<typeof cli> => cli(['audit', '--policy', baselinePolicyPath, '--kubeconfig', kubeconfig, '-o', 'policyreport', '--apply'])

await file.spec('setup: the ClusterPolicyReport CRD, a ServiceAccount with the component\'s role, a range in and one outside the policy', async (t) => {
  await ensureBuilt()
  if ((await cluster.raw('GET', crdPath)).status === 404) {
    const crd = load(readFileSync(join(repoRoot, 'test/fixtures/crds/clusterpolicyreports.yaml'), 'utf8'))
    const created = await cluster.raw('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', { body: crd })
    t.equal(created.status, 201, 'the test copy of the CRD is installed')
    createdCRD = true
    await poll('the ClusterPolicyReport CRD to be served', async () => (await cluster.raw('GET', '/apis/wgpolicyk8s.io/v1alpha2/clusterpolicyreports')).status === 200, { timeoutMs: 30_000 })
  } else {
    t.comment(`${crdName} exists: the cluster's own CRD is used and left alone`)
  }
  await cluster.raw('DELETE', reportPath)
  await removeIdentities(cluster, spec)
  const token = await serviceAccountToken(cluster, spec, account, componentRules)
  writeKubeconfig(kubeconfig, cluster, [{ name: 'audit', token }])

  await cluster.createServiceCIDR({ name: inPolicy.name, cidrs: [inPolicy.cidr], spec })
  await harness.setPolicy(policyWith({ enforcement: 'Audit' }))
  const created = await cluster.net.createServiceCIDRWithHttpInfo({ body: serviceCIDRObject({ name: outside.name, cidrs: [outside.cidr], spec }) })
  t.equal(created.httpStatusCode, 201, `${outside.name} (${outside.cidr}) let in under enforcement Audit`)
  await harness.resetPolicy()
})

await file.spec('--apply as the component\'s ServiceAccount writes the report, with a fail for the range outside', async (t) => {
  const { code, stdout, stderr } = await apply()
  t.equal(code, 0, `exit 0: written, findings and all (${stderr})`)
  t.match(stdout, /^ClusterPolicyReport servicecidr-guard applied \(\d+ pass, 1 fail, 0 warn, 0 error, 1 skip\)\n$/)
  const written = await report()
  t.ok(written, 'the report exists')
  const outsideResults = written?.results.filter((result) => result.resources[0]?.name === outside.name) ?? []
  t.strictSame(outsideResults.map(({ rule, result }) => `${rule} ${result}`), ['AllowedRanges fail', 'PrefixLength pass', 'Overlap pass'])
  t.equal(outsideResults[0]?.message, `spec.cidrs[0] ${outside.cidr} is outside the allowed IPv4 ranges (34.118.224.0/20)`)
  t.ok(written?.results.some((result) => result.resources[0]?.name === inPolicy.name && result.result === 'pass'), `${inPolicy.name} passes`)
  t.strictSame(written?.results.filter((result) => result.resources[0]?.name === 'kubernetes').map(({ rule, result }) => `${rule} ${result}`), ['ApiserverDefault skip'])
  t.equal(written?.summary['fail'], 1)
  t.ok(written?.metadata.managedFields?.some((entry) => entry.manager === 'servicecidr-guard' && entry.operation === 'Apply'), 'owned by the field manager servicecidr-guard, by server-side apply')
})

await file.spec('the next run replaces the report whole: the range gone, its results gone', async (t) => {
  await cluster.deleteServiceCIDR(outside.name)
  const { code } = await apply()
  t.equal(code, 0)
  const written = await report()
  t.notOk(written?.results.some((result) => result.resources[0]?.name === outside.name), `no result for ${outside.name} any more`)
  t.equal(written?.summary['fail'], 0, 'nothing fails')
})

await file.spec('the role holds nothing it does not need: without create the first report is refused', async (t) => {
  await cluster.raw('DELETE', reportPath)
  await setRules(cluster, spec, account, componentRules.map((rule) => ({ ...rule, verbs: rule.verbs.filter((verb) => verb !== 'create') })))
  const refused = await poll('RBAC to refuse the create (the authorizer\'s cache follows the role)', async () => {
    const run = await apply()
    return run.code === 2 ? run : undefined
  }, { timeoutMs: 30_000, intervalMs: 1000 })
  t.match(refused.stderr, /^servicecidr-guard: the cluster was audited, but the report could not be applied: https:\/\/\S+: HTTP 403: .*cannot create resource "clusterpolicyreports"/)
  await setRules(cluster, spec, account, componentRules)
  const again = await poll('RBAC to allow the create again', async () => {
    const run = await apply()
    return run.code === 0 ? run : undefined
  }, { timeoutMs: 30_000, intervalMs: 1000 })
  t.equal(again.code, 0, 'with the component\'s role as it is, it is written')
})

await file.spec('clean up: the report, the ServiceAccount and its role, and the CRD if this file installed it', async (t) => {
  await cluster.raw('DELETE', reportPath)
  await removeIdentities(cluster, spec)
  if (createdCRD) {
    await cluster.raw('DELETE', crdPath)
    await poll('the test CRD to be gone', async () => (await cluster.raw('GET', crdPath)).status === 404, { timeoutMs: 60_000 })
  }
  t.pass('removed')
})

await finish(context)
