// `audit --context ... / --all-contexts`: several clusters in one run, in parallel with a bound; one
// row per cluster, an unreadable one with its error; the fleet summary; -o json; the exit codes.

import t, { type Test } from 'tap'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { mapBounded } from '../../../src/cli/fleet.ts'
import { ClusterAccessError, processIO, type ClusterTarget } from '../../../src/cli/io.ts'
import { runCli } from '../../../src/cli/program.ts'
import { ClusterState, toIPAddressRecord, toServiceCIDRRecord } from '../../../src/policy/state.ts'
import { fixture, root, run } from '../../helpers/cli.ts'
import { standIn } from '../../support/apiserver.ts'

function state(serviceCIDRs: Record<string, string[]>, addresses: string[] = []): ClusterState {
  const cluster = new ClusterState()
  cluster.replaceServiceCIDRs(Object.entries(serviceCIDRs).map(([name, cidrs]) => toServiceCIDRRecord({ metadata: { name }, spec: { cidrs } })!))
  cluster.replaceIPAddresses(addresses.map((ip) => toIPAddressRecord({
    metadata: { name: ip, labels: { 'ipaddress.kubernetes.io/ip-family': 'IPv4', 'ipaddress.kubernetes.io/managed-by': 'ipallocator.k8s.io' } },
    spec: { parentRef: { group: '', resource: 'services', namespace: 'shop', name: 'cart' } },
  })!))
  return cluster
}

const contexts = [
  { name: 'prod-eu', server: 'https://eu.example:6443' },
  { name: 'prod-us', server: 'https://us.example:6443' },
  { name: 'gone', server: 'https://127.0.0.1:1' },
]

const clusters: Record<string, () => Promise<ClusterState>> = {
  'prod-eu': () => Promise.resolve(state({ kubernetes: ['34.118.224.0/28'], extra: ['34.118.225.0/24'] }, ['34.118.224.1'])),
  'prod-us': () => Promise.resolve(state({ kubernetes: ['34.118.224.0/28'], legacy: ['10.100.0.0/24'] }, ['34.118.240.5'])),
  'gone': () => Promise.reject(new ClusterAccessError('https://127.0.0.1:1: cannot connect: ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:1')),
}
const live = (target: ClusterTarget): Promise<ClusterState> => clusters[target.context ?? '']!()

t.test('one row per cluster, in the order asked, an unreadable one with its error; exit 3', async (t) => {
  const { code, stdout, stderr, liveReads } = await run(['audit', '--policy', fixture.gkePolicy, '--context', 'prod-eu', '--context', 'gone', '--context', 'prod-us'], { live, contexts })
  t.equal(code, 3, 'a cluster could not be read')
  t.equal(stderr, '')
  t.equal(stdout, [
    'CONTEXT  SERVER                   SERVICECIDRS  DENIED  ORPHANS  STATUS',
    'prod-eu  https://eu.example:6443  2             0       0        clean',
    'gone     https://127.0.0.1:1      -             -       -        ERROR https://127.0.0.1:1: cannot connect: ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:1',
    'prod-us  https://us.example:6443  2             1       1        2 findings',
    '',
    '3 clusters audited as servicecidr-guard:audit: 1 clean, 1 with findings (1 ServiceCIDR the policy would deny, 1 orphaned IPAddress), 1 could not be read',
    '',
  ].join('\n'))
  t.strictSame(liveReads.map((target) => target.context).sort(), ['gone', 'prod-eu', 'prod-us'], 'each context read once')
  t.ok(liveReads.every((target) => target.timeoutMs === 30_000 && target.kubeconfig === undefined), 'with the default kubeconfig and deadline')
})

t.test('exit 1 with findings in a readable fleet, 0 when every cluster is clean', async (t) => {
  const findings = await run(['audit', '--policy', fixture.gkePolicy, '--context', 'prod-eu', '--context', 'prod-us'], { live, contexts })
  t.equal(findings.code, 1)
  const clean = await run(['audit', '--policy', fixture.gkePolicy, '--context', 'prod-eu'], { live, contexts })
  t.equal(clean.code, 0)
  t.match(clean.stdout, '1 cluster audited as servicecidr-guard:audit: 1 clean, 0 with findings, 0 could not be read')
})

t.test('--all-contexts reads every context of the kubeconfig given, in its order', async (t) => {
  const { code, stdout, liveReads } = await run(['audit', '--policy', fixture.gkePolicy, '--all-contexts', '--kubeconfig', '/tmp/fleet', '--timeout', '5'], { live, contexts })
  t.equal(code, 3)
  t.strictSame(stdout.split('\n').slice(1, 4).map((line) => line.split(' ')[0]), ['prod-eu', 'prod-us', 'gone'])
  t.ok(liveReads.every((target) => target.kubeconfig === '/tmp/fleet' && target.timeoutMs === 5000), 'with the kubeconfig and deadline given')
})

t.test('-o json: every cluster\'s report as a single audit prints it, or its error, and the summary', async (t) => {
  const { stdout } = await run(['audit', '--policy', fixture.gkePolicy, '--context', 'prod-us', '--context', 'gone', '-o', 'json'], { live, contexts })
  const fleet = JSON.parse(stdout) as { kind: string, clusters: { context: string, server: string, error: string | null, report: { summary: object } | null }[], summary: object }
  t.equal(fleet.kind, 'FleetAuditReport')
  t.strictSame(fleet.clusters.map(({ context, server, error, report }) => ({ context, server, error, summary: report?.summary ?? null })), [
    { context: 'prod-us', server: 'https://us.example:6443', error: null, summary: { serviceCIDRs: 2, denied: 1, orphans: 1 } },
    { context: 'gone', server: 'https://127.0.0.1:1', error: 'https://127.0.0.1:1: cannot connect: ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:1', summary: null },
  ])
  t.strictSame(fleet.summary, { clusters: 2, clean: 0, withFindings: 1, unreadable: 1, serviceCIDRs: 2, denied: 1, orphans: 1 })
})

t.test('--parallel bounds how many clusters are read at once', async (t) => {
  let reading = 0
  let most = 0
  const many = Array.from({ length: 9 }, (_, index) => ({ name: `c${String(index)}`, server: `https://c${String(index)}` }))
  const slow = async (): Promise<ClusterState> => {
    most = Math.max(most, ++reading)
    await new Promise((resolve) => setTimeout(resolve, 5))
    reading--
    return state({ kubernetes: ['34.118.224.0/28'] })
  }
  const { code } = await run(['audit', '--policy', fixture.gkePolicy, '--all-contexts', '--parallel', '3'], { live: slow, contexts: many })
  t.equal(code, 0)
  t.equal(most, 3, 'three at a time, never more')
  const results = await mapBounded([5, 1, 3], 2, async (delay) => {
    await new Promise((resolve) => setTimeout(resolve, delay))
    return delay * 10
  })
  t.strictSame(results, [50, 10, 30], 'results in the order of the items, whatever finished first')
})

t.test('usage errors: an unknown context, both ways of naming contexts, --parallel 0', async (t) => {
  const unknown = await run(['audit', '--policy', fixture.gkePolicy, '--context', 'prod-eu', '--context', 'nope'], { live, contexts })
  t.equal(unknown.code, 2)
  t.equal(unknown.stderr, 'servicecidr-guard: the kubeconfig has no context "nope" (it has: prod-eu, prod-us, gone)\n')
  t.strictSame(unknown.liveReads, [], 'nothing is read')
  const both = await run(['audit', '--policy', fixture.gkePolicy, '--context', 'prod-eu', '--all-contexts'], { live, contexts })
  t.equal(both.code, 2)
  t.match(both.stderr, "error: option '--all-contexts' cannot be used with option '--context <name>'")
  const zero = await run(['audit', '--policy', fixture.gkePolicy, '--all-contexts', '--parallel', '0'], { live, contexts })
  t.equal(zero.code, 2)
  t.match(zero.stderr, "error: option '--parallel <n>' argument '0' is invalid. must be a whole number of clusters, 1 or more")
  // Node's timers fire at once past 2^31 - 1 ms: a timeout meant as "wait for ever" gave up at once.
  const forever = await run(['audit', '--policy', fixture.gkePolicy, '--all-contexts', '--timeout', '99999999'], { live, contexts })
  t.equal(forever.code, 2)
  t.match(forever.stderr, "error: option '--timeout <seconds>' argument '99999999' is invalid. must be a whole number of seconds, 1 or more, at most 86400")
  t.strictSame(forever.liveReads, [], 'nothing is read')
  const files = await run(['audit', '--policy', fixture.gkePolicy, '--cluster', fixture.gkeCluster, '--context', 'prod-eu'], { live, contexts })
  t.equal(files.code, 2)
})

/** An apiserver serving ServiceCIDRs in v1, holding only the default one. */
const oneServiceCIDR = (): ReturnType<typeof standIn> => standIn((request) => {
  const url = request.url ?? ''
  if (url === '/apis') return { status: 200, body: { kind: 'APIGroupList', groups: [{ name: 'networking.k8s.io', versions: [{ groupVersion: 'networking.k8s.io/v1', version: 'v1' }] }] } }
  if (url === '/apis/networking.k8s.io/v1') return { status: 200, body: { kind: 'APIResourceList', groupVersion: 'networking.k8s.io/v1', resources: [{ name: 'servicecidrs', namespaced: false, kind: 'ServiceCIDR', verbs: ['list'] }] } }
  if (url.startsWith('/apis/networking.k8s.io/v1/servicecidrs')) return { status: 200, body: { metadata: {}, items: [{ metadata: { name: 'kubernetes' }, spec: { cidrs: ['34.118.224.0/28'] } }] } }
  return { status: 200, body: { metadata: {}, items: [] } }
})

/**
 * A kubeconfig file whose clusters are all one stand-in apiserver (oneServiceCIDR), with the users
 * and contexts given; removed, with the apiserver, once the test ends.
 */
async function kubeconfigFile(t: Test, users: unknown[], contexts: unknown[]): Promise<{ server: string, path: string }> {
  const api = await oneServiceCIDR()
  const dir = mkdtempSync(join(tmpdir(), 'servicecidr-guard-fleet-'))
  t.teardown(async () => {
    await api.close()
    rmSync(dir, { recursive: true, force: true })
  })
  const server = api.kubeConfig.getCurrentCluster()?.server ?? ''
  const path = join(dir, 'kubeconfig')
  writeFileSync(path, JSON.stringify({ apiVersion: 'v1', kind: 'Config', clusters: [{ name: 'c', cluster: { server, 'insecure-skip-tls-verify': true } }], users, contexts }))
  return { server, path }
}

// A context whose credential plugin waits for a login (users[].user.exec) is given up at --timeout
// like a cluster that does not answer; and the process, whose event loop the plugin would hold until
// it ends, exits when the command is done. So the command is run as a user runs it.
t.test('a credential plugin that does not return: its row at --timeout, the others printed, and the process exits', async (t) => {
  const { server, path } = await kubeconfigFile(t,
    [{ name: 'ok', user: { token: 't' } }, { name: 'sso', user: { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: 'sleep', args: ['20'], interactiveMode: 'Never' } } }],
    [{ name: 'good', context: { cluster: 'c', user: 'ok' } }, { name: 'login', context: { cluster: 'c', user: 'sso' } }])
  const child = spawn(process.execPath, ['src/main.ts', 'audit', '--policy', fixture.gkePolicy, '--kubeconfig', path, '--all-contexts', '--timeout', '1'], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] })
  t.teardown(() => { child.kill() })
  let stdout = ''
  child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString() })
  const started = performance.now()
  const status = await Promise.race([new Promise<number | null>((resolve) => child.on('close', resolve)), delay(10_000, 'still running after 10 s', { ref: false })])
  t.equal(status, 3, 'a cluster could not be read')
  t.ok(performance.now() - started < 6000, 'done within a few seconds of the 1 s deadline, not when the plugin ends (20 s)')
  t.match(stdout, new RegExp(`^good +${server} +1 +0 +0 +clean$`, 'm'))
  t.match(stdout, new RegExp(`^login +${server} +- +- +- +ERROR ${server}: no answer within 1 s$`, 'm'))
})

// `kubectl config set-context scratch --namespace=dev` writes a context with no cluster: client-node
// refused the whole kubeconfig for it (exit 2 whatever was asked), as kubectl does not.
t.test('a context with no cluster: the others are audited; asked for, it is a row that says why', async (t) => {
  const { server, path } = await kubeconfigFile(t,
    [{ name: 'ok', user: { token: 't' } }],
    [{ name: 'scratch', context: { cluster: '', user: '', namespace: 'dev' } }, { name: 'good', context: { cluster: 'c', user: 'ok' } }])
  const audit = async (...args: string[]): Promise<{ code: number, stdout: string, stderr: string }> => {
    let stdout = ''
    let stderr = ''
    const io = { ...processIO(), stdout: (text: string) => { stdout += text }, stderr: (text: string) => { stderr += text } }
    const code = await runCli(['audit', '--policy', fixture.gkePolicy, '--kubeconfig', path, ...args], io, '0.0.0-test')
    return { code, stdout, stderr }
  }
  const good = await audit('--context', 'good')
  t.equal(good.code, 0, good.stderr)
  t.match(good.stdout, new RegExp(`^good +${server} +1 +0 +0 +clean$`, 'm'))
  const all = await audit('--all-contexts')
  t.equal(all.code, 0, 'every context that is a cluster')
  t.strictSame(all.stdout.split('\n').slice(1, -3).map((line) => line.split(' ')[0]), ['good'])
  const scratch = await audit('--context', 'scratch', '--context', 'good')
  t.equal(scratch.code, 3, 'a context asked for could not be read')
  t.match(scratch.stdout, /^scratch +- +- +- +ERROR the kubeconfig's context "scratch" names no cluster \(contexts\[0\]\.context\.cluster is empty\): set one with kubectl config set-context scratch --cluster NAME$/m)
  t.match(scratch.stdout, new RegExp(`^good +${server} +1 +0 +0 +clean$`, 'm'))
})
