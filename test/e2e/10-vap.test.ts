// The policy as a ValidatingAdmissionPolicy (`servicecidr-guard generate vap`) on the real
// kube-apiserver:
// - with the webhook unregistered, for every stateless case below (IPv4, IPv6, dual-stack, each
//   bound at and past its edge, denied ranges inside, around and next to the request, exemptions,
//   UPDATE and DELETE), the apiserver's verdict is the verdict of `servicecidr-guard check` for the
//   same policy, and a denial carries check's message (without the free range check suggests);
// - with both installed (config/vap/gke beside the webhook), a denial reads well, and what only the
//   webhook sees (an overlap) is still refused by the webhook;
// - what each adds to a CREATE, side by side in one run, as the apiserver measures its admission
//   plugins (apiserver_admission_controller_admission_duration_seconds).
// The table of cases and the latencies are written to .e2e/ (vap-differential.md, vap-latency.json).
//
// Ranges: 10.100.0.0/16, 192.168.0.0/20 and fd00:100::/48 (dry runs, and three ServiceCIDRs that
// exist while the cases run), 34.118.236.0/24 (created), 34.118.237.0/24 (dry runs).

import { loadAll } from 'js-yaml'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { cli, ensureBuilt } from './lib/cli.ts'
import { specLabel } from './lib/kube.ts'
import { outputDir, repoRoot } from './lib/paths.ts'
import { parseSamples, type Sample } from './lib/prom.ts'
import { begin, finish, waitWebhookReady } from './lib/setup.ts'
import { poll } from './lib/wait.ts'

const context = await begin(t, import.meta.url, 'vap')
const { cluster, harness, file, spec } = context
const scratch = mkdtempSync(join(tmpdir(), 'servicecidr-guard-e2e-vap-'))
t.teardown(() => {
  rmSync(scratch, { recursive: true, force: true })
})

const policyText = `apiVersion: servicecidr-guard/v1alpha1
kind: Policy
spec:
  allowedRanges: [10.100.0.0/16, 192.168.0.0/20, "fd00:100::/48"]
  deniedRanges: [10.100.64.0/18, 10.100.200.0/24, 10.100.32.0/25, 10.100.32.128/25, "fd00:100:0:ff00::/56"]
  overlap: Allow
  prefixLength: {ipv4: {min: 20, max: 28}, ipv6: {min: 64, max: 112}}
  deletion: {requireUnused: false}
  protectedNames: [e2e-vap-protected]
  exemptions: {usernames: [e2e-vap-exempt-user], groups: [e2e-vap-exempt-group]}
  enforcement: Deny
`
const policyPath = join(scratch, 'policy.yaml')
writeFileSync(policyPath, policyText)

/** ServiceCIDRs that exist while the cases run: for UPDATE and DELETE, and as check's --cluster. */
const fixtures = [
  { name: 'e2e-vap-existing', cidrs: ['10.100.2.0/24'] },
  { name: 'e2e-vap-protected', cidrs: ['10.100.3.0/24'] },
  // Outside the policy: it predates it.
  { name: 'e2e-vap-legacy', cidrs: ['10.150.0.0/24'] },
]

interface User {
  readonly name: string
  /** Besides system:masters (so RBAC lets every case through to admission) and system:authenticated. */
  readonly groups: readonly string[]
}

const someone: User = { name: 'e2e-vap-user', groups: [] }
const exemptUser: User = { name: 'e2e-vap-exempt-user', groups: [] }
const exemptGroupMember: User = { name: 'e2e-vap-user', groups: ['e2e-vap-exempt-group'] }

type Request =
  | { readonly operation: 'CREATE', readonly cidrs: readonly string[], readonly version?: string }
  | { readonly operation: 'UPDATE', readonly name: string, readonly cidrs: readonly string[], readonly label?: string }
  | { readonly operation: 'DELETE', readonly name: string }

interface Case {
  readonly name: string
  readonly request: Request
  readonly user?: User
  /** What the case is meant to show; check must agree, so that a case tests what its name says. */
  readonly expect: 'admit' | 'deny'
}

const create = (cidrs: string[], version?: string): Request => ({ operation: 'CREATE', cidrs, ...(version === undefined ? {} : { version }) })

const cases: Case[] = [
  { name: 'IPv4 inside an allowed range', request: create(['10.100.0.0/24']), expect: 'admit' },
  { name: 'IPv4 outside every allowed range', request: create(['10.101.0.0/24']), expect: 'deny' },
  { name: 'IPv4 /20, the shortest prefix allowed', request: create(['10.100.0.0/20']), expect: 'admit' },
  { name: 'IPv4 /19, one bit shorter', request: create(['10.100.0.0/19']), expect: 'deny' },
  { name: 'IPv4 /28, the longest prefix allowed', request: create(['10.100.16.0/28']), expect: 'admit' },
  { name: 'IPv4 /29, one bit longer', request: create(['10.100.16.0/29']), expect: 'deny' },
  { name: 'IPv4 an allowed range exactly', request: create(['192.168.0.0/20']), expect: 'admit' },
  { name: 'IPv4 the last /28 of an allowed range', request: create(['192.168.15.240/28']), expect: 'admit' },
  { name: 'IPv4 the first /28 past an allowed range', request: create(['192.168.16.0/28']), expect: 'deny' },
  { name: 'IPv4 /16: too large, and covering denied ranges', request: create(['10.100.0.0/16']), expect: 'deny' },
  { name: 'IPv4 inside a denied range', request: create(['10.100.64.0/24']), expect: 'deny' },
  { name: 'IPv4 a denied range exactly', request: create(['10.100.200.0/24']), expect: 'deny' },
  { name: 'IPv4 containing a denied range (partly denied)', request: create(['10.100.192.0/20']), expect: 'deny' },
  { name: 'IPv4 covering two denied ranges', request: create(['10.100.32.0/24']), expect: 'deny' },
  { name: 'IPv4 inside the second of two adjacent denied ranges', request: create(['10.100.32.128/26']), expect: 'deny' },
  { name: 'IPv4 the /28 just below a denied range', request: create(['10.100.63.240/28']), expect: 'admit' },
  { name: 'IPv4 the /28 just above a denied range', request: create(['10.100.128.0/28']), expect: 'admit' },
  { name: 'IPv6 /64 inside the allowed range, the shortest allowed', request: create(['fd00:100::/64']), expect: 'admit' },
  { name: 'IPv6 /63, one bit shorter', request: create(['fd00:100::/63']), expect: 'deny' },
  { name: 'IPv6 /112, the longest prefix allowed', request: create(['fd00:100:0:1::/112']), expect: 'admit' },
  { name: 'IPv6 /113, one bit longer', request: create(['fd00:100:0:1::/113']), expect: 'deny' },
  { name: 'IPv6 outside the allowed range', request: create(['fd00:101::/64']), expect: 'deny' },
  { name: 'IPv6 inside a denied range', request: create(['fd00:100:0:ff00::/64']), expect: 'deny' },
  { name: 'IPv6 a /112 at the end of a denied range', request: create(['fd00:100:0:ffff::/112']), expect: 'deny' },
  { name: 'IPv6 the /64 just below a denied range', request: create(['fd00:100:0:feff::/64']), expect: 'admit' },
  { name: 'dual-stack, both inside', request: create(['10.100.1.0/24', 'fd00:100:0:2::/64']), expect: 'admit' },
  { name: 'dual-stack, IPv6 first, both inside', request: create(['fd00:100:0:2::/64', '10.100.1.0/24']), expect: 'admit' },
  { name: 'dual-stack, the IPv6 CIDR outside', request: create(['10.100.1.0/24', 'fd00:101::/64']), expect: 'deny' },
  { name: 'dual-stack, the IPv4 CIDR outside', request: create(['10.101.1.0/24', 'fd00:100:0:2::/64']), expect: 'deny' },
  { name: 'dual-stack, each CIDR wrong in its own way', request: create(['10.100.64.0/24', 'fd00:100::/60']), expect: 'deny' },
  { name: 'outside, by an exempt user', request: create(['10.101.0.0/24']), user: exemptUser, expect: 'admit' },
  { name: 'outside, by a member of an exempt group', request: create(['10.101.0.0/24']), user: exemptGroupMember, expect: 'admit' },
  { name: 'UPDATE adding an IPv6 CIDR outside', request: { operation: 'UPDATE', name: 'e2e-vap-existing', cidrs: ['10.100.2.0/24', 'fd00:101::/64'] }, expect: 'deny' },
  { name: 'UPDATE adding an IPv6 CIDR inside', request: { operation: 'UPDATE', name: 'e2e-vap-existing', cidrs: ['10.100.2.0/24', 'fd00:100:0:3::/64'] }, expect: 'admit' },
  { name: 'UPDATE adding an IPv6 CIDR in a denied range', request: { operation: 'UPDATE', name: 'e2e-vap-existing', cidrs: ['10.100.2.0/24', 'fd00:100:0:ff01::/64'] }, expect: 'deny' },
  { name: 'UPDATE of labels only, on a range outside the policy', request: { operation: 'UPDATE', name: 'e2e-vap-legacy', cidrs: ['10.150.0.0/24'], label: 'touched' }, expect: 'admit' },
  { name: 'DELETE of a protected name', request: { operation: 'DELETE', name: 'e2e-vap-protected' }, expect: 'deny' },
  { name: 'DELETE of a protected name, by an exempt user', request: { operation: 'DELETE', name: 'e2e-vap-protected' }, user: exemptUser, expect: 'admit' },
  { name: 'DELETE of an unprotected range outside the policy', request: { operation: 'DELETE', name: 'e2e-vap-legacy' }, expect: 'admit' },
]

interface Verdict {
  readonly allowed: boolean
  /** The denial message, without the apiserver's prefix and without check's suggestion. */
  readonly message: string
}

const vapPrefix = (name: string): string =>
  `servicecidrs.networking.k8s.io "${name}" is forbidden: ValidatingAdmissionPolicy 'servicecidr-guard' with binding 'servicecidr-guard' denied request: `

const caseName = (index: number, request: Request): string => (request.operation === 'CREATE' ? `e2e-vap-case-${String(index)}` : request.name)

function impersonation(user: User): Record<string, string | string[]> {
  return { 'Impersonate-User': user.name, 'Impersonate-Group': ['system:masters', ...user.groups] }
}

/** The apiserver's verdict on the request, as a dry run (nothing is written). */
async function apiserverVerdict(index: number, { request, user = someone }: Case): Promise<Verdict> {
  const name = caseName(index, request)
  const headers = impersonation(user)
  let response: { status: number, body: unknown }
  if (request.operation === 'CREATE') {
    const version = request.version ?? 'v1'
    const body = { apiVersion: `networking.k8s.io/${version}`, kind: 'ServiceCIDR', metadata: { name, labels: { [specLabel]: spec } }, spec: { cidrs: request.cidrs } }
    response = await cluster.rawJSON('POST', `/apis/networking.k8s.io/${version}/servicecidrs?dryRun=All`, { body, headers })
  } else if (request.operation === 'UPDATE') {
    const current = await cluster.rawJSON('GET', `/apis/networking.k8s.io/v1/servicecidrs/${name}`)
    const object = current.body as { metadata: { labels?: Record<string, string> }, spec: { cidrs: string[] } }
    const labels = request.label === undefined ? object.metadata.labels : { ...object.metadata.labels, 'e2e.servicecidr-guard.dev/touched': request.label }
    const body = { ...object, metadata: { ...object.metadata, labels }, spec: { ...object.spec, cidrs: request.cidrs } }
    response = await cluster.rawJSON('PUT', `/apis/networking.k8s.io/v1/servicecidrs/${name}?dryRun=All`, { body, headers })
  } else {
    response = await cluster.rawJSON('DELETE', `/apis/networking.k8s.io/v1/servicecidrs/${name}?dryRun=All`, { headers })
  }
  if (response.status >= 200 && response.status < 300) return { allowed: true, message: '' }
  const message = (response.body as { message?: string }).message ?? ''
  if (response.status !== 403 || !message.startsWith(vapPrefix(name))) throw new Error(`case ${String(index)}: HTTP ${String(response.status)}: ${message}`)
  return { allowed: false, message: message.slice(vapPrefix(name).length) }
}

interface CheckJSON {
  decisions: { allowed: boolean, message: string, suggestion: string }[]
}

/** servicecidr-guard check's verdict on the same request, against the same ServiceCIDRs. */
async function checkVerdict(index: number, { request, user = someone }: Case): Promise<Verdict> {
  const name = caseName(index, request)
  const args = ['check', '--policy', policyPath, '--cluster', join(scratch, 'cluster.json'), '-o', 'json', '--as', user.name]
  for (const group of ['system:masters', ...user.groups, 'system:authenticated']) args.push('--as-group', group)
  if (request.operation === 'DELETE') {
    args.push('--delete', name)
  } else {
    const manifest = join(scratch, `case-${String(index)}.json`)
    writeFileSync(manifest, JSON.stringify({ apiVersion: 'networking.k8s.io/v1', kind: 'ServiceCIDR', metadata: { name }, spec: { cidrs: request.cidrs } }))
    args.push(manifest)
  }
  const { code, stdout, stderr } = await cli(args)
  if (code !== 0 && code !== 1) throw new Error(`check, case ${String(index)}: exit ${String(code)}: ${stderr}`)
  const [decision] = (JSON.parse(stdout) as CheckJSON).decisions
  if (decision === undefined) throw new Error(`check, case ${String(index)}: no decision`)
  const withoutSuggestion = decision.suggestion === '' ? decision.message : decision.message.slice(0, -decision.suggestion.length).trimEnd()
  return { allowed: decision.allowed, message: withoutSuggestion }
}

interface AdmissionObject { metadata: { name: string, labels?: Record<string, string> } }

/** The generated policy and binding, labelled as this spec's; installed, then in force. */
async function installPolicy(yaml: string, denied: { name: string, cidrs: string[] }): Promise<void> {
  const objects = loadAll(yaml) as AdmissionObject[]
  for (const object of objects) {
    object.metadata.labels = { ...object.metadata.labels, [specLabel]: spec }
    const plural = (object as { kind?: string }).kind === 'ValidatingAdmissionPolicy' ? 'validatingadmissionpolicies' : 'validatingadmissionpolicybindings'
    const created = await cluster.raw('POST', `/apis/admissionregistration.k8s.io/v1/${plural}`, { body: object })
    if (created.status !== 201) throw new Error(`creating ${plural}/${object.metadata.name}: HTTP ${String(created.status)}: ${created.text}`)
  }
  // The admission plugin learns of new policies from its informers: wait until one denies.
  await poll('the ValidatingAdmissionPolicy to be in force', async () => {
    const answer = await cluster.rawJSON('POST', '/apis/networking.k8s.io/v1/servicecidrs?dryRun=All', {
      body: { apiVersion: 'networking.k8s.io/v1', kind: 'ServiceCIDR', metadata: { name: denied.name }, spec: { cidrs: denied.cidrs } },
      headers: impersonation(someone),
    })
    return answer.status === 403 && ((answer.body as { message?: string }).message ?? '').startsWith(vapPrefix(denied.name))
  }, { timeoutMs: 30_000, intervalMs: 250 })
}

async function removePolicy(admitted: { name: string, cidrs: string[] }): Promise<void> {
  await cluster.removeAdmissionPolicies()
  await poll('the ValidatingAdmissionPolicy to be gone from admission', async () => {
    const answer = await cluster.rawJSON('POST', '/apis/networking.k8s.io/v1/servicecidrs?dryRun=All', {
      body: { apiVersion: 'networking.k8s.io/v1', kind: 'ServiceCIDR', metadata: { name: admitted.name }, spec: { cidrs: admitted.cidrs } },
    })
    return !((answer.body as { message?: string }).message ?? '').includes('ValidatingAdmissionPolicy')
  }, { timeoutMs: 30_000, intervalMs: 250 })
}

const outsideDifferential = { name: 'e2e-vap-probe', cidrs: ['10.101.0.0/24'] }
let served: string[] = []

await file.spec('setup: the webhook unregistered, three ServiceCIDRs, the generated policy in force', async (t) => {
  await ensureBuilt()
  served = await cluster.networkingVersions()
  const generated = await cli(['generate', 'vap', '--policy', policyPath])
  t.equal(generated.code, 0, `generate vap: ${generated.stderr}`)
  await harness.unregisterWebhook()
  t.equal(await cluster.webhookConfiguration(), undefined, 'the webhook is unregistered: only kube-apiserver decides')
  for (const fixture of fixtures) await cluster.createServiceCIDR({ ...fixture, spec })
  writeFileSync(join(scratch, 'cluster.json'), JSON.stringify({
    apiVersion: 'v1',
    kind: 'List',
    items: fixtures.map(({ name, cidrs }) => ({ apiVersion: 'networking.k8s.io/v1', kind: 'ServiceCIDR', metadata: { name }, spec: { cidrs } })),
  }))
  await installPolicy(generated.stdout, outsideDifferential)
  const status = await cluster.rawJSON('GET', '/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/servicecidr-guard')
  const warnings = (status.body as { status?: { typeChecking?: { expressionWarnings?: unknown[] } } }).status?.typeChecking?.expressionWarnings ?? []
  t.strictSame(warnings, [], 'the apiserver type-checked the CEL without a warning')
})

const rows: string[] = []

await file.spec(`differential: ${String(cases.length)} stateless cases and more where v1beta1 is served, kube-apiserver's verdict and message are check's`, async (t) => {
  const all = [...cases]
  if (served.includes('v1beta1')) {
    all.push({ name: 'v1beta1: IPv4 outside', request: create(['10.101.0.0/24'], 'v1beta1'), expect: 'deny' })
    all.push({ name: 'v1beta1: IPv4 inside', request: create(['10.100.0.0/24'], 'v1beta1'), expect: 'admit' })
  }
  t.ok(cases.length >= 30, `${String(cases.length)} cases (30 at least)`)
  let same = 0
  for (const [index, entry] of all.entries()) {
    const fromCheck = await checkVerdict(index, entry)
    const fromApiserver = await apiserverVerdict(index, entry)
    const verdict = (allowed: boolean): string => (allowed ? 'admitted' : 'denied')
    t.equal(verdict(fromCheck.allowed), verdict(entry.expect === 'admit'), `${entry.name}: check ${verdict(fromCheck.allowed)}, as the case means`)
    t.equal(verdict(fromApiserver.allowed), verdict(fromCheck.allowed), `${entry.name}: kube-apiserver ${verdict(fromApiserver.allowed)}, as check`)
    t.equal(fromApiserver.message, fromCheck.message, `${entry.name}: the same message`)
    const agree = fromApiserver.allowed === fromCheck.allowed && fromApiserver.message === fromCheck.message
    if (agree) same++
    const request = entry.request.operation === 'DELETE' ? `DELETE ${entry.request.name}` : `${entry.request.operation} ${entry.request.cidrs.join(', ')}${entry.request.operation === 'CREATE' && entry.request.version ? ` (${entry.request.version})` : ''}`
    rows.push(`| ${String(index + 1)} | ${entry.name} | \`${request}\` | ${entry.user === undefined ? '' : entry.user.name + (entry.user.groups.length > 0 ? ` (${entry.user.groups.join(', ')})` : '')} | ${verdict(fromCheck.allowed)} | ${verdict(fromApiserver.allowed)} | ${agree ? 'yes' : 'NO'} |`)
  }
  const table = [
    `${String(all.length)} cases on ${await cluster.serverVersion()}, ${String(same)} with the same verdict and message.`,
    '',
    '| # | case | request | as | check | kube-apiserver (VAP) | same |',
    '|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n')
  writeFileSync(join(outputDir, 'vap-differential.md'), `${table}\n`)
  t.comment(table)
})

await file.spec('the policy removed, the webhook registered again', async (t) => {
  await removePolicy(outsideDifferential)
  await Promise.all(fixtures.map((fixture) => cluster.deleteServiceCIDR(fixture.name)))
  await harness.restoreWebhook()
  t.ok(await cluster.webhookConfiguration(), 'the webhook is registered')
  await waitWebhookReady(harness)
})

const outsideGKE = { name: 'e2e-vap-outside', cidrs: ['10.100.0.0/24'] }

await file.spec('both installed (config/vap/gke beside the webhook): a denial reads well, and the webhook still refuses an overlap', async (t) => {
  await installPolicy(readFileSync(join(repoRoot, 'config/vap/gke/validating-admission-policy.yaml'), 'utf8'), outsideGKE)
  const outside = await cluster.rawJSON('POST', '/apis/networking.k8s.io/v1/servicecidrs', {
    body: { apiVersion: 'networking.k8s.io/v1', kind: 'ServiceCIDR', metadata: { name: outsideGKE.name, labels: { [specLabel]: spec } }, spec: { cidrs: outsideGKE.cidrs } },
  })
  const message = (outside.body as { message?: string }).message
  t.equal(outside.status, 403, 'refused with 403 Forbidden, as the webhook refuses')
  t.equal(message,
    `${vapPrefix(outsideGKE.name)}ServiceCIDR "${outsideGKE.name}" is not allowed by the servicecidr-guard policy: spec.cidrs[0] 10.100.0.0/24 is outside the allowed IPv4 ranges (34.118.224.0/20).`,
    'kube-apiserver\'s policy answers first, in the webhook\'s words')
  t.comment(`kubectl prints: Error from server (Forbidden): ${String(message)}`)

  await cluster.createServiceCIDR({ name: 'e2e-vap-taken', cidrs: ['34.118.236.0/24'], spec })
  await cluster.waitServiceCIDRReady('e2e-vap-taken')
  const overlap = await cluster.rawJSON('POST', '/apis/networking.k8s.io/v1/servicecidrs?dryRun=All', {
    body: { apiVersion: 'networking.k8s.io/v1', kind: 'ServiceCIDR', metadata: { name: 'e2e-vap-overlap' }, spec: { cidrs: ['34.118.236.0/25'] } },
  })
  t.equal(overlap.status, 403, 'an overlap passes the policy in kube-apiserver and is refused by the webhook')
  t.match((overlap.body as { message?: string }).message, /^admission webhook "validate\.servicecidr-guard\.dev" denied the request: ServiceCIDR "e2e-vap-overlap" is not allowed by the servicecidr-guard policy: spec\.cidrs\[0\] 34\.118\.236\.0\/25 overlaps ServiceCIDR "e2e-vap-taken" \(34\.118\.236\.0\/24\)\. \S+ is free and the policy admits it\.$/)
})

/** Sum and count of the histogram series whose labels include `match`. */
function total(samples: readonly Sample[], name: string, match: Record<string, string>): { sum: number, count: number } {
  const matches = (sample: Sample): boolean => Object.entries(match).every(([key, value]) => sample.labels[key] === value)
  const add = (suffix: string): number => samples.filter((sample) => sample.name === `${name}${suffix}` && matches(sample)).reduce((sum, sample) => sum + sample.value, 0)
  return { sum: add('_sum'), count: add('_count') }
}

await file.spec('latency of an admitted CREATE: the ValidatingAdmissionPolicy against the webhook, side by side', async (t) => {
  const requests = 200
  const send = async (index: number): Promise<void> => {
    const answer = await cluster.raw('POST', '/apis/networking.k8s.io/v1/servicecidrs?dryRun=All', {
      body: { apiVersion: 'networking.k8s.io/v1', kind: 'ServiceCIDR', metadata: { name: `e2e-vap-latency-${String(index)}` }, spec: { cidrs: ['34.118.237.0/24'] } },
    })
    if (answer.status !== 201) throw new Error(`dry-run CREATE: HTTP ${String(answer.status)}: ${answer.text}`)
  }
  for (let index = 0; index < 20; index++) await send(index)
  const before = parseSamples(await harness.apiserverMetrics())
  const started = performance.now()
  for (let index = 0; index < requests; index++) await send(index)
  const clientMs = (performance.now() - started) / requests
  const after = parseSamples(await harness.apiserverMetrics())
  const delta = (name: string, match: Record<string, string>): { count: number, meanMs: number } => {
    const [a, b] = [total(after, name, match), total(before, name, match)]
    const count = a.count - b.count
    return { count, meanMs: count === 0 ? NaN : Math.round(((a.sum - b.sum) / count) * 1e6) / 1e3 }
  }
  const plugin = 'apiserver_admission_controller_admission_duration_seconds'
  const figures = {
    requests,
    kubernetes: await cluster.serverVersion(),
    validatingAdmissionPolicy: delta(plugin, { name: 'ValidatingAdmissionPolicy', operation: 'CREATE', type: 'validate', rejected: 'false' }),
    validatingAdmissionWebhook: delta(plugin, { name: 'ValidatingAdmissionWebhook', operation: 'CREATE', type: 'validate', rejected: 'false' }),
    webhookCall: delta('apiserver_admission_webhook_admission_duration_seconds', { name: 'validate.servicecidr-guard.dev', operation: 'CREATE' }),
    validateStep: delta('apiserver_admission_step_admission_duration_seconds', { operation: 'CREATE', type: 'validate', rejected: 'false' }),
    clientRoundTripMs: Math.round(clientMs * 1000) / 1000,
  }
  writeFileSync(join(outputDir, 'vap-latency.json'), `${JSON.stringify(figures, null, 2)}\n`)
  t.equal(figures.validatingAdmissionPolicy.count, requests, `the ValidatingAdmissionPolicy plugin ran for each of the ${String(requests)} CREATEs`)
  t.equal(figures.validatingAdmissionWebhook.count, requests, 'so did the webhook plugin')
  t.ok(figures.validatingAdmissionPolicy.meanMs < figures.validatingAdmissionWebhook.meanMs, 'the in-process policy costs less than the call to the webhook')
  t.comment(`per admitted CREATE (mean of ${String(requests)} dry runs, kube-apiserver ${figures.kubernetes}):`)
  t.comment(`  ValidatingAdmissionPolicy plugin  ${String(figures.validatingAdmissionPolicy.meanMs)} ms`)
  t.comment(`  ValidatingAdmissionWebhook plugin ${String(figures.validatingAdmissionWebhook.meanMs)} ms (its call to servicecidr-guard: ${String(figures.webhookCall.meanMs)} ms)`)
  t.comment(`  ratio webhook / policy: ${(figures.validatingAdmissionWebhook.meanMs / figures.validatingAdmissionPolicy.meanMs).toFixed(1)}`)
  t.comment(`  the whole validating step ${String(figures.validateStep.meanMs)} ms; client round trip ${String(figures.clientRoundTripMs)} ms`)
})

await file.spec('clean up: the policy removed', async (t) => {
  await removePolicy(outsideGKE)
  await cluster.deleteServiceCIDR('e2e-vap-taken')
  t.pass('removed')
})

await finish(context)
