// `npm run bench:flood` and `npm run bench:slow`: one replica under hostile load, and the same run
// against an older commit side by side. Figures, not a test: loopback only, bounded in time.
//
//   npm run bench:flood -- [--baseline REF] [--shape padding|labels]
//   npm run bench:slow -- [--baseline REF]
//
// For each build (the baseline first, if given, then this checkout): a replica started as the
// Deployment runs it (bench/replica.ts: dist/main.js serve with the Deployment's NODE_OPTIONS); a
// legitimate client sending one ServiceCIDR CREATE review every 100 ms over keep-alive connections,
// as kube-apiserver does, with the webhook registration's 5 s timeout (a review not answered in
// time counts as 5 s); and, for HOSTILE_SECONDS, the hostile client (bench/hostile-client.ts) in
// its own process:
//   flood: FLOOD_CLIENTS (32) connections sending the largest body the build accepts, continuously;
//   slow:  SLOW_CONNECTIONS (1,000) idle or slowly-sending connections, reopened when closed.
// Peak RSS is the kernel's high-water mark (VmHWM) of the replica.
//
// Environment: HOSTILE_SECONDS (default 20), FLOOD_CLIENTS, SLOW_CONNECTIONS, BENCH_PORT (first of
// four ports; default: free ones), BENCH_KUBECONFIG (default: the local control plane's
// kubeconfig when hack/local/up.sh is up, else one whose apiserver never answers, so that the
// replica stays unready and decides fail-closed).

import { fork } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { Pool } from 'undici'
import { admissionReview } from './fixtures.ts'
import { checkoutOf, ensureBenchLease, freePort, mib, repo, selfSignedCertificate, startReplica, unreachableKubeconfig, waitFor, type Replica } from './replica.ts'
import { percentile } from './stats.ts'

const { values, positionals } = parseArgs({ allowPositionals: true, options: { baseline: { type: 'string' }, shape: { type: 'string', default: 'labels' } } })
const mode = positionals[0]
if (mode !== 'flood' && mode !== 'slow') throw new Error('usage: node bench/hostile.ts flood|slow [--baseline REF] [--shape padding|labels]')
const seconds = Number(process.env['HOSTILE_SECONDS'] ?? 20)
const floodClients = Number(process.env['FLOOD_CLIENTS'] ?? 32)
const slowConnections = Number(process.env['SLOW_CONNECTIONS'] ?? 1000)
/** kube-apiserver's call to the webhook gives up after timeoutSeconds (config/webhook/manifests.yaml). */
const reviewTimeoutMs = 5000

const work = mkdtempSync(join(tmpdir(), 'scg-hostile-'))
const tls = selfSignedCertificate(work)
const local = process.env['LOCAL_DIR'] ?? join(repo, '.local')
const localKubeconfig = join(local, 'kubeconfig')
const kubeconfig = process.env['BENCH_KUBECONFIG'] ?? (existsSync(localKubeconfig) ? localKubeconfig : unreachableKubeconfig(work))
// An admitted legitimate CREATE is recorded in the shared reservation Lease, through kube-apiserver.
if (kubeconfig === localKubeconfig) ensureBenchLease(local)
const policy = join(repo, 'config/policies/gke-beta.yaml')

interface Legitimate { sent: number, answered: number, refused: Record<string, number>, failed: number, p50: number, p99: number, max: number }

/** One review every 100 ms, each on a free keep-alive connection of a small pool, until `until`. */
async function legitimate(origin: string, until: number): Promise<Legitimate> {
  const pool = new Pool(origin, { connections: 8, pipelining: 1, connect: { ca: tls.ca, servername: 'localhost' }, headersTimeout: reviewTimeoutMs, bodyTimeout: reviewTimeoutMs })
  const latencies: number[] = []
  const refused: Record<string, number> = {}
  let answered = 0
  let failed = 0
  const one = async (index: number): Promise<void> => {
    const uid = `legit-${index}`
    const body = admissionReview('CREATE', uid, [`34.118.${224 + (index % 16)}.0/24`], uid)
    const sent = performance.now()
    try {
      const response = await pool.request({ path: '/validate', method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: AbortSignal.timeout(reviewTimeoutMs) })
      const text = await response.body.text()
      const took = performance.now() - sent
      if (response.statusCode === 200 && text.includes(`"uid":"${uid}"`)) {
        answered++
        latencies.push(took)
      } else {
        refused[response.statusCode] = (refused[response.statusCode] ?? 0) + 1
        latencies.push(reviewTimeoutMs)
      }
    } catch {
      failed++
      latencies.push(reviewTimeoutMs)
    }
  }
  const started = performance.now()
  const pending: Promise<void>[] = []
  for (let index = 0; started + index * 100 < until; index++) {
    const wait = started + index * 100 - performance.now()
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
    pending.push(one(index))
  }
  await Promise.all(pending)
  await pool.close()
  const sorted = latencies.sort((a, b) => a - b)
  return { sent: pending.length, answered, refused, failed, p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted.at(-1) ?? Number.NaN }
}

function hostile(args: string[]): Promise<Record<string, unknown>> {
  const child = fork(join(import.meta.dirname, 'hostile-client.ts'), args, { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] })
  let out = ''
  child.stdout?.on('data', (chunk: Buffer) => { out += chunk.toString() })
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => {
      if (code === 0) resolve(JSON.parse(out) as Record<string, unknown>)
      else reject(new Error(`hostile client exited with ${code ?? 'a signal'}`))
    })
  })
}

async function maxReviewBytes(checkout: string): Promise<number> {
  const review = await import(join(checkout, 'dist/admission/review.js')) as { maxReviewBytes?: number }
  if (review.maxReviewBytes !== undefined) return review.maxReviewBytes
  // Before this limit lived in the admission layer, the server declared it.
  const app = await import(join(checkout, 'dist/server/app.js')) as { bodyLimit: number }
  return app.bodyLimit
}

interface Row { build: string, idleRSS: number, peakRSS: number, survived: boolean, legit: Legitimate, hostile: Record<string, unknown> }

async function measure(ref: string): Promise<Row> {
  const checkout = checkoutOf(ref, work)
  const [port, healthPort] = [await freePort(0), await freePort(1)]
  const replica: Replica = startReplica({ checkout, cert: tls.cert, key: tls.key, policy, kubeconfig, port, healthPort, logFile: join(work, `${ref}.log`) })
  try {
    await waitFor(`http://127.0.0.1:${healthPort}/livez`, 200, replica.startedAt, 30_000)
    if (kubeconfig !== join(work, 'unreachable.kubeconfig')) await waitFor(`http://127.0.0.1:${healthPort}/readyz`, 200, replica.startedAt, 120_000)
    await new Promise((resolve) => setTimeout(resolve, 2000))
    const idleRSS = replica.memory()?.rss ?? Number.NaN
    let peakRSS = 0
    const sampler = setInterval(() => { peakRSS = Math.max(peakRSS, replica.memory()?.peak ?? 0) }, 100)
    const origin = `https://127.0.0.1:${port}`
    const until = performance.now() + seconds * 1000
    const caFile = join(work, 'tls.crt')
    const args = mode === 'flood'
      ? ['flood', String(port), String(seconds), String(floodClients), String(await maxReviewBytes(checkout)), values.shape, caFile]
      : ['slow', String(port), String(seconds), String(slowConnections), caFile]
    const [legit, attack] = await Promise.all([legitimate(origin, until), hostile(args)])
    clearInterval(sampler)
    peakRSS = Math.max(peakRSS, replica.memory()?.peak ?? 0)
    const survived = !replica.exited()
    const label = ref === 'current' ? 'this checkout' : ref
    return { build: label, idleRSS, peakRSS, survived, legit, hostile: attack }
  } finally {
    await replica.stop()
  }
}

try {
  const refs = values.baseline === undefined ? ['current'] : [values.baseline, 'current']
  const rows: Row[] = []
  for (const ref of refs) rows.push(await measure(ref))
  const what = mode === 'flood'
    ? `${floodClients} clients sending the largest AdmissionReview each build accepts (shape: ${values.shape}), continuously`
    : `${slowConnections} idle or slowly-sending connections (TCP only, TLS idle, slow headers, slow body), reopened when closed`
  console.log(`\nservicecidr-guard under hostile load — Node ${process.version}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, load average ${loadavg()[0]?.toFixed(1) ?? '?'}`)
  console.log(`${what}, for ${seconds} s; a legitimate client sends a review every 100 ms (5 s timeout). Cluster: ${kubeconfig.endsWith('unreachable.kubeconfig') ? 'none (replica unready, fail-closed)' : kubeconfig}\n`)
  console.log('build                      RSS idle  peak RSS  survived   legit sent  answered  refused  failed   p50 ms   p99 ms   max ms')
  for (const row of rows) {
    const refused = Object.values(row.legit.refused).reduce((sum, n) => sum + n, 0)
    console.log(`  ${row.build.padEnd(24)} ${mib(row.idleRSS).padStart(8)} ${mib(row.peakRSS).padStart(9)} ${String(row.survived).padStart(9)} ${String(row.legit.sent).padStart(12)} ${String(row.legit.answered).padStart(9)} ${String(refused).padStart(8)} ${String(row.legit.failed).padStart(7)} ${row.legit.p50.toFixed(1).padStart(8)} ${row.legit.p99.toFixed(1).padStart(8)} ${row.legit.max.toFixed(0).padStart(8)}`)
  }
  console.log('\nhostile side, as it saw it:')
  for (const row of rows) console.log(`  ${row.build.padEnd(24)} ${JSON.stringify(row.hostile)}`)
  console.log('(RSS in MiB; peak RSS is VmHWM, the kernel\'s high-water mark for the process)')
} finally {
  if (process.env['BENCH_KEEP'] === undefined) rmSync(work, { recursive: true, force: true })
  else console.log(`kept ${work}`)
}
