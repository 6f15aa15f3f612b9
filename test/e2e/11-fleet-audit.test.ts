// `servicecidr-guard audit --all-contexts` over a kubeconfig of four contexts: the cluster as the
// admin, the same cluster as a ServiceAccount allowed only to list ServiceCIDRs and IPAddresses, the
// same cluster as a ServiceAccount allowed nothing, and an API server that is not there. The two
// that can read give the same report; the other two are rows with their errors (HTTP 403, connection
// refused); the run exits 3. Then the two readable contexts alone, with a range outside the policy
// (admitted in Audit mode): a finding in each row, exit 1; exit 0 once it is gone.
//
// Ranges: 10.203.0.0/24 (out of policy).

import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { baselinePolicyPath } from './harness/index.ts'
import { cli, ensureBuilt } from './lib/cli.ts'
import { removeIdentities, serviceAccountToken, writeKubeconfig } from './lib/identities.ts'
import { policyWith } from './lib/policy.ts'
import { begin, finish } from './lib/setup.ts'

const context = await begin(t, import.meta.url, 'fleet-audit')
const { cluster, harness, file, spec } = context
const scratch = mkdtempSync(join(tmpdir(), 'servicecidr-guard-e2e-fleet-'))
t.teardown(() => {
  rmSync(scratch, { recursive: true, force: true })
})
const kubeconfig = join(scratch, 'kubeconfig')
const outside = { name: 'e2e-fleet-outside', cidr: '10.203.0.0/24' }

interface FleetJSON {
  kind: string
  clusters: { context: string, server: string, error: string | null, report: { serviceCIDRs: unknown[], orphans: unknown[], summary: { denied: number, orphans: number } } | null }[]
  summary: { clusters: number, clean: number, withFindings: number, unreadable: number, serviceCIDRs: number, denied: number, orphans: number }
}

/** A loopback port nothing listens on: one that was free a moment ago. */
async function closedPort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise((resolve) => server.close(resolve))
  return port
}

let unreachable = ''

await file.spec('setup: a kubeconfig of four contexts, two of them readable', async (t) => {
  await ensureBuilt()
  await removeIdentities(cluster, spec)
  const reader = await serviceAccountToken(cluster, spec, 'e2e-fleet-reader', [
    { apiGroups: ['networking.k8s.io'], resources: ['servicecidrs', 'ipaddresses'], verbs: ['list'] },
  ])
  const nobody = await serviceAccountToken(cluster, spec, 'e2e-fleet-nobody', [])
  unreachable = `https://127.0.0.1:${String(await closedPort())}`
  writeKubeconfig(kubeconfig, cluster, [
    { name: 'admin' },
    { name: 'reader', token: reader },
    { name: 'forbidden', token: nobody },
    { name: 'unreachable', server: unreachable },
  ])
  t.pass(`${kubeconfig}: admin, reader (list servicecidrs and ipaddresses), forbidden (no RBAC), unreachable (${unreachable})`)
})

await file.spec('--all-contexts: one row per cluster, the unreadable ones with their errors, exit 3', async (t) => {
  const text = await cli(['audit', '--policy', baselinePolicyPath, '--kubeconfig', kubeconfig, '--all-contexts', '--timeout', '20'])
  t.equal(text.code, 3, 'exit 3: a cluster could not be read')
  t.equal(text.stderr, '')
  const rows = text.stdout.split('\n')
  t.match(rows[0], /^CONTEXT\s+SERVER\s+SERVICECIDRS\s+DENIED\s+ORPHANS\s+STATUS$/)
  t.strictSame(rows.slice(1, 5).map((row) => row.split(/\s+/)[0]), ['admin', 'reader', 'forbidden', 'unreachable'], 'the kubeconfig\'s order')
  t.match(rows[3], / ERROR https:\/\/\S+: HTTP 403: .*"system:serviceaccount:default:e2e-fleet-nobody" cannot list resource "ipaddresses"/)
  t.match(rows[4], new RegExp(` ERROR ${unreachable.replaceAll('.', '\\.')}: cannot connect: ECONNREFUSED`))
  t.match(text.stdout, /\n4 clusters audited as servicecidr-guard:audit: \d clean, \d with findings.*, 2 could not be read\n$/)
  t.comment(`servicecidr-guard audit --policy config/policies/gke-beta.yaml --kubeconfig FLEET --all-contexts\n${text.stdout}`)

  const json = await cli(['audit', '--policy', baselinePolicyPath, '--kubeconfig', kubeconfig, '--all-contexts', '--parallel', '2', '-o', 'json'])
  t.equal(json.code, 3)
  const fleet = JSON.parse(json.stdout) as FleetJSON
  t.equal(fleet.kind, 'FleetAuditReport')
  const [admin, reader, forbidden, gone] = fleet.clusters
  t.ok(admin?.report && reader?.report, 'admin and reader read the cluster')
  t.strictSame(reader?.report, admin?.report, 'the read-only ServiceAccount sees what the admin sees')
  t.equal(admin?.error, null)
  t.match(forbidden?.error, /HTTP 403/)
  t.equal(forbidden?.report, null)
  t.match(gone?.error, /cannot connect: ECONNREFUSED/)
  t.strictSame({ clusters: fleet.summary.clusters, unreadable: fleet.summary.unreadable }, { clusters: 4, unreadable: 2 })
})

await file.spec('the two readable contexts alone: exit 1 while each holds a finding, exit 0 once it is gone', async (t) => {
  const run = (output: string[]) => cli(['audit', '--policy', baselinePolicyPath, '--kubeconfig', kubeconfig, '--context', 'admin', '--context', 'reader', ...output])
  await harness.setPolicy(policyWith({ enforcement: 'Audit' }))
  await cluster.createServiceCIDR({ name: outside.name, cidrs: [outside.cidr], spec })
  await harness.resetPolicy()
  await cluster.waitServiceCIDRReady(outside.name)
  t.comment(`${outside.name} (${outside.cidr}, outside the policy) admitted in Audit mode`)

  const text = await run([])
  t.equal(text.code, 1, 'exit 1: findings, every cluster read')
  const rows = text.stdout.split('\n')
  for (const [index, name] of ['admin', 'reader'].entries()) {
    t.match(rows[index + 1], new RegExp(`^${name}\\s+https://\\S+\\s+\\d+\\s+1\\s+0\\s+1 finding$`), `${name}: one ServiceCIDR denied, no orphans`)
  }
  t.match(text.stdout, /\n2 clusters audited as servicecidr-guard:audit: 0 clean, 2 with findings \(2 ServiceCIDRs the policy would deny, 0 orphaned IPAddresses\), 0 could not be read\n$/)
  t.comment(`servicecidr-guard audit --policy config/policies/gke-beta.yaml --kubeconfig FLEET --context admin --context reader\n${text.stdout}`)
  const json = await run(['-o', 'json'])
  t.equal(json.code, 1)
  const fleet = JSON.parse(json.stdout) as FleetJSON
  t.strictSame(fleet.summary, { clusters: 2, clean: 0, withFindings: 2, unreadable: 0, serviceCIDRs: fleet.summary.serviceCIDRs, denied: 2, orphans: 0 })

  await cluster.deleteServiceCIDR(outside.name)
  const clean = await run([])
  t.equal(clean.code, 0, 'exit 0 once the range is gone')
  t.match(clean.stdout, /\n2 clusters audited as servicecidr-guard:audit: 2 clean, 0 with findings, 0 could not be read\n$/)

  const unknown = await cli(['audit', '--policy', baselinePolicyPath, '--kubeconfig', kubeconfig, '--context', 'admin', '--context', 'staging'])
  t.equal(unknown.code, 2, 'a context the kubeconfig lacks is a usage error')
  t.equal(unknown.stderr, 'servicecidr-guard: the kubeconfig has no context "staging" (it has: admin, reader, forbidden, unreachable)\n')
})

await file.spec('clean up: the ServiceAccounts and their roles', async (t) => {
  await removeIdentities(cluster, spec)
  t.pass('removed')
})

await finish(context)
