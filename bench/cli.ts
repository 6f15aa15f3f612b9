// Figures for the command line on a large cluster: 1,000 ServiceCIDRs and 100,000 IPAddresses,
// written as `kubectl get servicecidrs,ipaddresses -o yaml` (and -o json) prints them. Prints
// medians of several runs and peak RSS; it asserts nothing, so it is not a timed test.
//
//   node bench/cli.ts [--runs N] [--keep]      (--keep: leave the dumps for timing other builds on them)
//
// Evaluation is timed in this process on a loaded state; whole commands are timed in fresh child
// processes (the same runCli that main.ts calls), each reporting its own time and peak RSS. So are
// the ways to parse the YAML dump, side by side: the parser the project used before (`yaml`), the
// one it uses (js-yaml) on the whole file and item by item (src/config/yaml.ts), and JSON.parse of
// the JSON dump as the anchor.

import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { loadAll } from 'js-yaml'
// The parser this project used before js-yaml: a devDependency only for this comparison.
import { parseAllDocuments } from 'yaml'
import { runChecks } from '../src/cli/check.ts'
import type { CommandIO } from '../src/cli/io.ts'
import { planRange } from '../src/cli/plan.ts'
import { runCli } from '../src/cli/program.ts'
import { buildClusterState, readManifests, readObjects } from '../src/cluster/files.ts'
import { parsePolicy } from '../src/config/policy.ts'
import { readYAMLDocuments } from '../src/config/yaml.ts'
import { auditCluster } from '../src/policy/audit.ts'
import type { ClusterState } from '../src/policy/state.ts'

interface ServiceCIDRSpec { readonly name: string, readonly cidr: string, readonly index: number }
interface IPAddressSpec { readonly ip: string, readonly index: number, readonly namespace: string }

// 990 ServiceCIDRs 10.(100 + i / 256).(i % 256).0/24 (the first is the default "kubernetes"), each
// holding 100 Services' addresses; 10 more that overlap some of them; and 1,000 addresses in no
// ServiceCIDR. All inside the policy's 10.96.0.0/11.
function generate(): { serviceCIDRs: ServiceCIDRSpec[], ipAddresses: IPAddressSpec[] } {
  const serviceCIDRs: ServiceCIDRSpec[] = []
  const ipAddresses: IPAddressSpec[] = []
  for (let i = 0; i < 990; i++) {
    const net = `10.${100 + Math.floor(i / 256)}.${i % 256}`
    serviceCIDRs.push({ name: i === 0 ? 'kubernetes' : `range-${String(i).padStart(4, '0')}`, cidr: `${net}.0/24`, index: i })
    for (let host = 1; host <= 100; host++) ipAddresses.push({ ip: `${net}.${host}`, index: ipAddresses.length, namespace: `team-${i % 50}` })
  }
  for (let k = 1; k <= 10; k++) serviceCIDRs.push({ name: `overlapping-${k}`, cidr: `10.100.${k}.0/25`, index: 990 + k })
  for (let j = 0; j < 1000; j++) ipAddresses.push({ ip: `10.120.${j >> 7}.${(j & 127) + 1}`, index: ipAddresses.length, namespace: 'orphans' })
  return { serviceCIDRs, ipAddresses }
}

const serviceCIDRYAML = ({ name, cidr, index }: ServiceCIDRSpec): string => `- apiVersion: networking.k8s.io/v1
  kind: ServiceCIDR
  metadata:
    creationTimestamp: "2026-11-02T09:14:05Z"
    finalizers:
    - networking.k8s.io/service-cidr-finalizer
    generation: 1
    name: ${name}
    resourceVersion: "${1000 + index}"
    uid: 00000000-0000-4000-8000-${String(index).padStart(12, '0')}
  spec:
    cidrs:
    - ${cidr}
  status:
    conditions:
    - lastTransitionTime: "2026-11-02T09:14:05Z"
      message: Kubernetes Service CIDR is ready
      reason: ""
      status: "True"
      type: Ready
`

const ipAddressYAML = ({ ip, index, namespace }: IPAddressSpec): string => `- apiVersion: networking.k8s.io/v1
  kind: IPAddress
  metadata:
    creationTimestamp: "2026-11-02T09:20:31Z"
    generation: 1
    labels:
      ipaddress.kubernetes.io/ip-family: IPv4
      ipaddress.kubernetes.io/managed-by: ipallocator.k8s.io
    name: ${ip}
    resourceVersion: "${100_000 + index}"
    uid: 00000000-0000-4000-9000-${String(index).padStart(12, '0')}
  spec:
    parentRef:
      group: ""
      name: svc-${index}
      namespace: ${namespace}
      resource: services
`

const serviceCIDRObject = ({ name, cidr, index }: ServiceCIDRSpec): object => ({
  apiVersion: 'networking.k8s.io/v1',
  kind: 'ServiceCIDR',
  metadata: {
    creationTimestamp: '2026-11-02T09:14:05Z',
    finalizers: ['networking.k8s.io/service-cidr-finalizer'],
    generation: 1,
    name,
    resourceVersion: String(1000 + index),
    uid: `00000000-0000-4000-8000-${String(index).padStart(12, '0')}`,
  },
  spec: { cidrs: [cidr] },
  status: { conditions: [{ lastTransitionTime: '2026-11-02T09:14:05Z', message: 'Kubernetes Service CIDR is ready', reason: '', status: 'True', type: 'Ready' }] },
})

const ipAddressObject = ({ ip, index, namespace }: IPAddressSpec): object => ({
  apiVersion: 'networking.k8s.io/v1',
  kind: 'IPAddress',
  metadata: {
    creationTimestamp: '2026-11-02T09:20:31Z',
    generation: 1,
    labels: { 'ipaddress.kubernetes.io/ip-family': 'IPv4', 'ipaddress.kubernetes.io/managed-by': 'ipallocator.k8s.io' },
    name: ip,
    resourceVersion: String(100_000 + index),
    uid: `00000000-0000-4000-9000-${String(index).padStart(12, '0')}`,
  },
  spec: { parentRef: { group: '', name: `svc-${index}`, namespace, resource: 'services' } },
})

/** Writes the cluster as kubectl's -o yaml and -o json (4-space indent) print it; answers the sizes. */
async function writeDumps(yamlPath: string, jsonPath: string): Promise<{ serviceCIDRs: number, ipAddresses: number, yaml: number, json: number }> {
  const { serviceCIDRs, ipAddresses } = generate()
  const yaml = ['apiVersion: v1\nitems:\n', ...serviceCIDRs.map(serviceCIDRYAML), ...ipAddresses.map(ipAddressYAML), 'kind: List\nmetadata:\n  resourceVersion: ""\n'].join('')
  await writeFile(yamlPath, yaml)
  const items = [...serviceCIDRs.map(serviceCIDRObject), ...ipAddresses.map(ipAddressObject)]
  const json = JSON.stringify({ apiVersion: 'v1', items, kind: 'List', metadata: { resourceVersion: '' } }, null, 4)
  await writeFile(jsonPath, json)
  return { serviceCIDRs: serviceCIDRs.length, ipAddresses: ipAddresses.length, yaml: yaml.length, json: json.length }
}

const policyText = `apiVersion: servicecidr-guard/v1alpha1
kind: Policy
spec:
  allowedRanges: [10.96.0.0/11]
  overlap: Deny
  prefixLength: {ipv4: {min: 16, max: 28}}
  protectedNames: [kubernetes]
`

// Two admitted, one overlapping the first, one outside the policy.
const manifestsYAML = [
  ['new-a', '10.110.0.0/24'],
  ['new-b', '10.110.1.0/24'],
  ['new-c', '10.110.0.128/25'],
  ['new-d', '172.16.0.0/24'],
].map(([name, cidr]) => `apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: ${name}}\nspec: {cidrs: [${cidr}]}\n`).join('---\n')

const runsFlag = process.argv.indexOf('--runs')
const runs = runsFlag > 0 ? Number(process.argv[runsFlag + 1]) : 7

const discard: CommandIO = {
  stdout: () => undefined,
  stderr: (text) => process.stderr.write(text),
  readFile: (path) => readFile(path, 'utf8'),
  readCluster: () => Promise.reject(new Error('offline')),
  applyReport: () => Promise.reject(new Error('offline')),
  contexts: () => [],
  now: () => new Date(),
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

async function time<T>(label: string, count: number, body: () => T | Promise<T>): Promise<T> {
  const samples: number[] = []
  let result: T | undefined
  for (let i = 0; i < count; i++) {
    const start = performance.now()
    result = await body()
    samples.push(performance.now() - start)
  }
  console.log(`${label.padEnd(58)} median ${median(samples).toFixed(1).padStart(8)} ms  (min ${Math.min(...samples).toFixed(1)}, max ${Math.max(...samples).toFixed(1)}, ${count} runs)`)
  return result as T
}

function load(text: string, file: string): ClusterState {
  const read = readObjects(text, file)
  if (!read.ok) throw new Error(read.error)
  const built = buildClusterState([read.value])
  if (!built.ok) throw new Error(built.error)
  return built.value
}

interface ChildResult { readonly code: number, readonly ms: number, readonly maxRSSKiB: number }

/** Child mode: run one command line as main.ts would (output discarded), report time and peak RSS. */
if (process.argv[2] === '--child') {
  const start = performance.now()
  const code = await runCli(JSON.parse(process.argv[3] ?? '[]') as string[], discard, 'bench')
  const result: ChildResult = { code, ms: performance.now() - start, maxRSSKiB: process.resourceUsage().maxRSS }
  process.stdout.write(JSON.stringify(result))
  process.exit(0)
}

/** How many items the documents of a parsed file hold, iterating streamed ones. */
function countItems(documents: Iterable<unknown>): number {
  let count = 0
  for (const document of documents) {
    const items = (document as { items?: Iterable<unknown> } | null)?.items
    for (const item of items ?? []) if (item !== undefined) count++
  }
  return count
}

const parsers: Record<string, (text: string) => number> = {
  'yaml (before)': (text) => countItems(parseAllDocuments(text).map((document) => document.toJS() as unknown)),
  'js-yaml, whole file': (text) => countItems(loadAll(text)),
  'js-yaml, item by item (src/config/yaml.ts)': (text) => countItems([...readYAMLDocuments(text)].map(({ value }) => value)),
  'JSON.parse of the JSON dump (anchor)': (text) => countItems([JSON.parse(text) as unknown]),
}

/** Child mode: read and parse one file with one parser, report time (read included) and peak RSS. */
if (process.argv[2] === '--parse') {
  const start = performance.now()
  const parser = parsers[process.argv[3] ?? '']
  if (parser === undefined) throw new Error(`no parser ${process.argv[3] ?? ''}`)
  const items = parser(readFileSync(process.argv[4] ?? '', 'utf8'))
  const result: ChildResult = { code: items, ms: performance.now() - start, maxRSSKiB: process.resourceUsage().maxRSS }
  process.stdout.write(JSON.stringify(result))
  process.exit(0)
}

function child(args: readonly string[], mode = '--child'): ChildResult {
  const ran = spawnSync(process.execPath, [import.meta.filename, mode, ...(mode === '--child' ? [JSON.stringify(args)] : args)], { encoding: 'utf8', maxBuffer: 1 << 20 })
  if (ran.status !== 0) throw new Error(`child failed: ${ran.stderr}`)
  return JSON.parse(ran.stdout) as ChildResult
}

function command(label: string, count: number, args: readonly string[], mode = '--child'): void {
  const results = Array.from({ length: count }, () => child(args, mode))
  const ms = results.map((result) => result.ms)
  const rss = Math.max(...results.map((result) => result.maxRSSKiB)) / 1024
  console.log(`${label.padEnd(58)} median ${median(ms).toFixed(0).padStart(8)} ms  (min ${Math.min(...ms).toFixed(0)}, max ${Math.max(...ms).toFixed(0)}, ${count} runs)  peak RSS ${rss.toFixed(0)} MiB  exit ${results[0]?.code}`)
}

const dir = await mkdtemp(join(tmpdir(), 'servicecidr-guard-bench-'))
try {
  const yamlPath = join(dir, 'cluster.yaml')
  const jsonPath = join(dir, 'cluster.json')
  const policyPath = join(dir, 'policy.yaml')
  const manifestPath = join(dir, 'manifests.yaml')
  const sizes = await writeDumps(yamlPath, jsonPath)
  await writeFile(policyPath, policyText)
  await writeFile(manifestPath, manifestsYAML)
  console.log(`snapshot: ${sizes.serviceCIDRs} ServiceCIDRs, ${sizes.ipAddresses} IPAddresses; ` +
    `kubectl -o yaml ${(sizes.yaml / 2 ** 20).toFixed(1)} MiB, -o json ${(sizes.json / 2 ** 20).toFixed(1)} MiB`)
  console.log(`node ${process.version}, ${runs} runs each unless noted\n`)

  console.log('In this process, on a loaded state:')
  const loaded = await time('load: read + parse + build state, JSON dump', runs, async () => load(await readFile(jsonPath, 'utf8'), jsonPath))
  const policy = parsePolicy(policyText, 'bench')
  const user = { username: 'servicecidr-guard:check', groups: [] }
  const manifestObjects = readObjects(manifestsYAML, 'manifests.yaml')
  if (!manifestObjects.ok) throw new Error(manifestObjects.error)
  const manifests = readManifests([manifestObjects.value])
  if (!manifests.ok) throw new Error(manifests.error)
  await time('check: 4 manifests + --delete (in use), evaluation only', runs, () => {
    const reviewed = runChecks(policy, loaded, manifests.value, ['range-0500'], user)
    // Undo what was admitted so that every run starts from the same cluster.
    for (const { request, decision } of reviewed) {
      if (decision.allowed && request.operation === 'CREATE') loaded.removeServiceCIDR(request.name)
    }
    return reviewed
  })
  await time('plan --size 200, evaluation only', runs, () => planRange(policy, loaded, 'IPv4', { size: 200n }))
  await time('plan --prefix-length 16 (none fits), evaluation only', runs, () => planRange(policy, loaded, 'IPv4', { prefixLength: 16 }))
  const report = await time('audit, evaluation only', runs, () => auditCluster(policy, loaded, user))
  console.log(`  (audit: ${report.serviceCIDRs.filter(({ decision }) => !decision.allowed).length} ServiceCIDRs denied, ${report.orphans.length} orphans)`)

  console.log('\nParsing the dump, each in a fresh process (read + parse, items counted; "exit" is the item count):')
  for (const name of Object.keys(parsers)) {
    const file = name.startsWith('JSON') ? jsonPath : yamlPath
    // The parser the project used before takes tens of seconds: one run.
    command(name, name.startsWith('yaml') ? 1 : Math.min(runs, 3), [name, file], '--parse')
  }

  console.log('\nWhole commands, each in a fresh process (time excludes Node start-up):')
  const check = ['check', '--policy', policyPath, '--delete', 'range-0500', manifestPath, '-o', 'json']
  command('check, JSON dump', runs, [...check, '--cluster', jsonPath])
  command('audit, JSON dump', runs, ['audit', '--policy', policyPath, '--cluster', jsonPath, '-o', 'json'])
  command('plan --size 200, JSON dump', runs, ['plan', '--policy', policyPath, '--cluster', jsonPath, '--size', '200'])
  const yamlRuns = Math.min(runs, 3)
  command('check, YAML dump', yamlRuns, [...check, '--cluster', yamlPath])
  command('audit, YAML dump', yamlRuns, ['audit', '--policy', policyPath, '--cluster', yamlPath, '-o', 'json'])
} finally {
  if (process.argv.includes('--keep')) console.log(`\ndumps, policy and manifests kept in ${dir}`)
  else await rm(dir, { recursive: true, force: true })
}
