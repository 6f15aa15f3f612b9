// `servicecidr-guard audit` against the real apiserver, on a state the spec sets up: the default
// range with its utilisation, a range inside the policy with one Service in it, and a range outside
// the policy that got in while the webhook was in Audit mode (allowed, only logged). The command
// must flag that one, exit 1, and find no orphaned IPAddresses; once it is gone, exit 0.
//
// Ranges: 34.118.234.0/24 (in policy, one Service at 34.118.234.10), 10.201.0.0/24 (out of policy).

import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { baselinePolicyPath } from './harness/index.ts'
import { serviceCIDRObject } from './lib/kube.ts'
import { repoRoot } from './lib/paths.ts'
import { policyWith } from './lib/policy.ts'
import { counter, parseSamples } from './lib/prom.ts'
import { begin, finish } from './lib/setup.ts'
import { poll } from './lib/wait.ts'

const run = promisify(execFile)
const context = await begin(t, import.meta.url, 'audit')
const { cluster, harness, file, spec } = context
const inPolicy = { name: 'e2e-audit-in-policy', cidr: '34.118.234.0/24', service: 'e2e-audit-svc', ip: '34.118.234.10' }
const outside = { name: 'e2e-audit-outside', cidr: '10.201.0.0/24' }

interface AuditJSON {
  kind: string
  serviceCIDRs: {
    name: string
    cidrs: string[]
    allowed: boolean
    bypass?: string
    violations: { rule: string, field: string, message: string }[]
    utilisation: { cidr: string, inUse: number, usable: string, percent?: number }[]
  }[]
  orphans: unknown[]
  summary: { serviceCIDRs: number, denied: number, orphans: number }
}

/** Runs the built command line on Node 24 (npm's), as a user would; never throws on exit 1. */
async function audit(): Promise<{ code: number, report: AuditJSON, stderr: string }> {
  const node = join(repoRoot, 'node_modules/.bin/node')
  const main = join(repoRoot, 'dist/main.js')
  const args = [main, 'audit', '--policy', baselinePolicyPath, '--kubeconfig', harness.kubeconfigPath, '-o', 'json']
  try {
    const { stdout, stderr } = await run(node, args, { timeout: 60_000 })
    return { code: 0, report: JSON.parse(stdout) as AuditJSON, stderr }
  } catch (error) {
    const { code, stdout, stderr } = error as { code?: number, stdout?: string, stderr?: string }
    if (typeof code !== 'number' || code === 2 || !stdout) throw new Error(`audit failed (exit ${String(code)}): ${stderr ?? String(error)}`, { cause: error })
    return { code, report: JSON.parse(stdout) as AuditJSON, stderr: stderr ?? '' }
  }
}

async function auditedReviews(): Promise<number> {
  return counter((await harness.webhookMetrics()).flatMap(parseSamples), 'servicecidr_guard_reviews_total', { outcome: 'audited' })
}

await file.spec('setup: an in-policy range with a Service, and an out-of-policy range admitted in Audit mode', async (t) => {
  if (!existsSync(join(repoRoot, 'dist/main.js'))) await run('npm', ['run', '--silent', 'build'], { cwd: repoRoot, timeout: 300_000 })
  t.ok(existsSync(join(repoRoot, 'dist/main.js')), 'dist/main.js is built')
  await cluster.createServiceCIDR({ name: inPolicy.name, cidrs: [inPolicy.cidr], spec })
  await cluster.waitServiceCIDRReady(inPolicy.name)
  const service = await cluster.createService(spec, inPolicy.service, { clusterIP: inPolicy.ip })
  t.equal(service.spec?.clusterIP, inPolicy.ip, `Service ${inPolicy.service} holds ${inPolicy.ip}`)

  await harness.setPolicy(policyWith({ enforcement: 'Audit' }))
  t.comment('policy in force: enforcement Audit')
  const before = await auditedReviews()
  const answer = await cluster.net.createServiceCIDRWithHttpInfo({ body: serviceCIDRObject({ name: outside.name, cidrs: [outside.cidr], spec }) })
  t.equal(answer.httpStatusCode, 201, `${outside.name} (${outside.cidr}, outside the policy) is admitted in Audit mode`)
  t.equal(answer.headers['warning'], undefined, 'without a warning to the client (Audit only logs)')
  t.equal(await auditedReviews(), before + 1, 'the webhook counted it as an audited review')
  // kube-apiserver keeps the violation in its audit event: it prefixes the webhook's key with the
  // webhook's name and drops a key that then has two slashes (checkKeyFormat), so this proves the
  // key is one it accepts.
  const created = await poll('the audit event of the create', async () => {
    const events = await harness.apiserverAuditEvents(outside.name)
    return events.find((event) => event.stage === 'ResponseComplete' && event.verb === 'create')
  }, { timeoutMs: 30_000, intervalMs: 250 })
  t.equal(created.responseStatus?.code, 201, 'kube-apiserver audited the create (201)')
  t.match(created.annotations?.['validate.servicecidr-guard.dev/violations'] ?? '', `AllowedRanges: spec.cidrs[0] ${outside.cidr} is outside the allowed IPv4 ranges (34.118.224.0/20)`,
    'with the violation under validate.servicecidr-guard.dev/violations')
  await harness.resetPolicy()
  await cluster.waitServiceCIDRReady(outside.name)
})

await file.spec('audit flags the out-of-policy range, reports utilisation, finds no orphans, exits 1', async (t) => {
  const { code, report } = await audit()
  t.equal(code, 1, 'exit status 1: a ServiceCIDR the policy would deny')
  t.equal(report.kind, 'AuditReport', 'an AuditReport')
  const byName = new Map(report.serviceCIDRs.map((entry) => [entry.name, entry]))

  const kubernetes = byName.get('kubernetes')
  t.ok(kubernetes?.allowed, '"kubernetes" is not flagged')
  t.equal(kubernetes?.bypass, 'ApiserverDefault', 'as the apiserver\'s own default range')
  const defaultUse = kubernetes?.utilisation[0]
  t.ok(defaultUse !== undefined && defaultUse.inUse >= 1, `its utilisation is reported: ${String(defaultUse?.inUse)} of ${String(defaultUse?.usable)} in use (${String(defaultUse?.percent)} %)`)
  const usable = await cluster.getServiceCIDR('kubernetes').then((object) => object?.spec?.cidrs?.[0])
  const bits = Number(usable?.split('/')[1])
  t.equal(defaultUse?.usable, String(2 ** (32 - bits) - 2), `usable addresses of ${String(usable)}: network and broadcast excluded`)

  const flagged = byName.get(outside.name)
  t.equal(flagged?.allowed, false, `${outside.name} is flagged`)
  t.ok(flagged?.violations.some((violation) => violation.rule === 'AllowedRanges' && violation.message.includes(`${outside.cidr} is outside the allowed IPv4 ranges (34.118.224.0/20)`)), 'as outside the allowed block')

  const ok = byName.get(inPolicy.name)
  t.equal(ok?.allowed, true, `${inPolicy.name} passes`)
  t.same(ok?.utilisation.map(({ cidr, inUse, usable: size }) => ({ cidr, inUse, usable: size })), [{ cidr: inPolicy.cidr, inUse: 1, usable: '254' }], 'with its one Service counted against 254 usable addresses')

  t.same(report.orphans, [], 'no orphaned IPAddresses')
  t.equal(report.summary.denied, 1, 'summary: one ServiceCIDR denied')
  t.equal(report.summary.orphans, 0, 'summary: no orphans')
})

await file.spec('once the out-of-policy range is gone, audit exits 0', async (t) => {
  await cluster.deleteServiceCIDR(outside.name)
  const { code, report } = await audit()
  t.equal(code, 0, 'exit status 0: nothing found')
  t.equal(report.summary.denied, 0, 'nothing denied')
  t.notOk(report.serviceCIDRs.some((entry) => entry.name === outside.name), `${outside.name} is no longer listed`)
})

await finish(context)
