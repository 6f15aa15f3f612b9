// `npm run bench:startup`: how long a replica takes from process start to /readyz 200 against a
// real kube-apiserver holding many IPAddresses, and its RSS at that moment. Figures, not a test.
//
//   npm run bench:startup -- [--baseline REF] [--runs 5] [--count 100000]
//
// Needs the local control plane with a Service range large enough for COUNT addresses, e.g.
//   WEBHOOK=0 SERVICE_CIDR=10.96.0.0/14 hack/local/up.sh
// It first tops the cluster up to COUNT IPAddresses (kept between runs; hack/local/down.sh removes
// everything), all inside the one large default ServiceCIDR. As a user would, that is creating
// Services, is faithful but slow: kube-apiserver's ClusterIP allocator creates one IPAddress at a
// time, about 50 a second on this machine, so 100,000 would take over half an hour. So the bench
// creates IPAddress objects directly, 32 requests at a time: shaped as the allocator writes them
// (family label, parentRef to a Service in namespace scg-bench), except that the managed-by label
// names this bench instead of ipallocator.k8s.io. It has to: kube-apiserver's repair loop deletes
// an allocator-labelled IPAddress whose Service does not exist after 60 s (syncIPAddress in
// pkg/registry/core/service/ipallocator/controller/repairip.go). The webhook lists, watches and
// stores such an object exactly as an allocator's; only its decisions count it differently.
//
// Then, for each build (the baseline, if given, and this checkout), alternately, RUNS times: start
// a replica as the Deployment runs it (bench/replica.ts), poll /readyz every 20 ms, and read the
// replica's RSS (VmRSS) and peak RSS (VmHWM) the moment it answers 200. Prints the medians.
//
// Environment: LOCAL_DIR (default .local), BENCH_PORT (first of two ports; default: free ones).

import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { Pool } from 'undici'
import { checkoutOf, ensureBenchLease, freePort, mib, repo, selfSignedCertificate, startReplica, waitFor } from './replica.ts'
import { median } from './stats.ts'

const { values } = parseArgs({ options: { baseline: { type: 'string' }, runs: { type: 'string', default: '5' }, count: { type: 'string', default: '100000' } } })
const runs = Number(values.runs)
const count = Number(values.count)
const namespace = 'scg-bench'

const local = process.env['LOCAL_DIR'] ?? join(repo, '.local')
const env = Object.fromEntries(readFileSync(join(local, 'env'), 'utf8').split('\n').filter((line) => line.includes('=')).map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]))
const apiserver = new Pool(env['APISERVER_URL'] ?? '', {
  connections: 32,
  connect: { ca: readFileSync(join(local, 'pki/ca.crt')), cert: readFileSync(join(local, 'pki/admin.crt')), key: readFileSync(join(local, 'pki/admin.key')) },
})

async function api(method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ status: number, json: Record<string, unknown> }> {
  const response = await apiserver.request({ method, path, headers: { 'content-type': 'application/json', accept: 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
  return { status: response.statusCode, json: await response.body.json() as Record<string, unknown> }
}

async function ipAddressCount(): Promise<number> {
  const list = await api('GET', '/apis/networking.k8s.io/v1/ipaddresses?limit=1')
  const metadata = list.json['metadata'] as { remainingItemCount?: number }
  return (list.json['items'] as unknown[]).length + (metadata.remainingItemCount ?? 0)
}

/** The i-th address of the bench, from 10.98.0.0 up: inside 10.96.0.0/14, away from the allocator's first addresses. */
const benchAddress = (i: number): string => `10.${98 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`

/** Creates IPAddress objects until the cluster holds `count`; 32 requests in flight. */
async function fill(): Promise<void> {
  const have = await ipAddressCount()
  if (have >= count) return
  console.log(`filling: ${have.toLocaleString('en')} IPAddresses, creating more up to ${count.toLocaleString('en')}`)
  const started = performance.now()
  let next = 0
  let created = 0
  let report = performance.now() + 10_000
  const worker = async (): Promise<void> => {
    while (have + created < count && next < count * 2) {
      const index = next++
      const response = await api('POST', '/apis/networking.k8s.io/v1/ipaddresses', {
        apiVersion: 'networking.k8s.io/v1',
        kind: 'IPAddress',
        metadata: {
          name: benchAddress(index),
          labels: { 'ipaddress.kubernetes.io/ip-family': 'IPv4', 'ipaddress.kubernetes.io/managed-by': 'servicecidr-guard-bench' },
        },
        spec: { parentRef: { group: '', resource: 'services', namespace, name: `bench-direct-${index}` } },
      })
      if (response.status === 201) created++
      else if (response.status !== 409) throw new Error(`creating IPAddress ${benchAddress(index)}: ${response.status} ${JSON.stringify(response.json).slice(0, 300)}`)
      if (performance.now() > report) {
        report = performance.now() + 10_000
        console.log(`  ${(have + created).toLocaleString('en')} IPAddresses, ${(created / ((performance.now() - started) / 1000)).toFixed(0)} created a second`)
      }
    }
  }
  await Promise.all(Array.from({ length: 32 }, worker))
  console.log(`filled in ${((performance.now() - started) / 1000).toFixed(0)} s: ${(await ipAddressCount()).toLocaleString('en')} IPAddresses`)
}

interface Sample { readyMs: number, rss: number, peak: number }

const work = mkdtempSync(join(tmpdir(), 'scg-startup-'))
try {
  await fill()
  ensureBenchLease(local)
  const addresses = await ipAddressCount()
  const tls = selfSignedCertificate(work)
  const refs = values.baseline === undefined ? ['current'] : [values.baseline, 'current']
  const checkouts = new Map(refs.map((ref) => [ref, checkoutOf(ref, work)]))
  const samples = new Map<string, Sample[]>(refs.map((ref) => [ref, []]))
  const [port, healthPort] = [await freePort(0), await freePort(1)]
  for (let run = 0; run < runs; run++) {
    for (const ref of refs) {
      const replica = startReplica({
        checkout: checkouts.get(ref) ?? repo,
        cert: tls.cert,
        key: tls.key,
        policy: join(repo, 'config/policies/gke-beta.yaml'),
        kubeconfig: join(local, 'kubeconfig'),
        port,
        healthPort,
        logFile: join(work, `${ref}-${run}.log`),
      })
      try {
        const readyMs = await waitFor(`http://127.0.0.1:${healthPort}/readyz`, 200, replica.startedAt, 120_000)
        const memory = replica.memory()
        samples.get(ref)?.push({ readyMs, rss: memory?.rss ?? Number.NaN, peak: memory?.peak ?? Number.NaN })
      } finally {
        await replica.stop()
      }
    }
  }
  console.log(`\nservicecidr-guard start-up — Node ${process.version}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, load average ${loadavg()[0]?.toFixed(1) ?? '?'}`)
  console.log(`kube-apiserver ${env['KUBE_VERSION'] ?? '?'} holding ${addresses.toLocaleString('en')} IPAddresses; process start to /readyz 200, ${runs} runs each, medians (min-max)\n`)
  console.log('build                      ready s            RSS at ready MiB     peak RSS MiB')
  for (const [ref, list] of samples) {
    const ready = list.map((sample) => sample.readyMs / 1000)
    const rss = list.map((sample) => sample.rss)
    const peak = list.map((sample) => sample.peak)
    const span = (xs: number[], format: (x: number) => string): string => `${format(median(xs))} (${format(Math.min(...xs))}-${format(Math.max(...xs))})`
    console.log(`  ${(ref === 'current' ? 'this checkout' : ref).padEnd(24)} ${span(ready, (x) => x.toFixed(2)).padEnd(18)} ${span(rss, mib).padEnd(20)} ${span(peak, mib)}`)
  }
} finally {
  await apiserver.close()
  if (process.env['BENCH_KEEP'] === undefined) rmSync(work, { recursive: true, force: true })
  else console.log(`kept ${work}`)
}
