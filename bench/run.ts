// `npm run bench`: prints what servicecidr-guard sustains on this machine. Figures, not a test.
//
//  1. heap held by a cache of 100,000 IPAddresses (fresh process, after GC)
//  2. decision time of decide() alone, per scenario, with 1,000 ServiceCIDRs and 100,000 IPAddresses
//  3. reviews/s and p50/p99 latency over HTTPS keep-alive, the load generated in this process and
//     the server in another (bench/server.ts)
//
// BENCH_SECONDS (default 10) and BENCH_CONNECTIONS (default 8) tune the HTTP runs.

import { execFileSync, fork, spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { decodeReview } from '../src/admission/review.ts'
import { parsePolicy } from '../src/config/policy.ts'
import { timeDecisions } from './decide.ts'
import { admissionReview, benchPolicy, buildState, scenarios } from './fixtures.ts'
import { load } from './load.ts'

const seconds = Number(process.env['BENCH_SECONDS'] ?? 10)
const connections = Number(process.env['BENCH_CONNECTIONS'] ?? 8)
const ipCount = 100_000
const here = import.meta.dirname
const mib = (bytes: number): string => (bytes / 1024 / 1024).toFixed(1)

console.log(`servicecidr-guard benchmark — Node ${process.version}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}`)
console.log(`cluster: 1,001 ServiceCIDRs, ${ipCount.toLocaleString('en')} IPAddresses; HTTP: ${connections} keep-alive connections, ${seconds} s a scenario\n`)

// 1. Memory
const memory = spawnSync(process.execPath, ['--expose-gc', join(here, 'memory.ts'), String(ipCount)], { encoding: 'utf8' })
if (memory.status !== 0) throw new Error(`memory benchmark failed: ${memory.stderr}`)
const held = JSON.parse(memory.stdout) as { count: number, heapBytes: number }
console.log(`cache of ${held.count.toLocaleString('en')} IPAddresses: ${mib(held.heapBytes)} MiB of heap (${(held.heapBytes / held.count).toFixed(0)} bytes each)\n`)

// 2. Decision time
const policy = parsePolicy(benchPolicy, 'bench')
const state = buildState(1000, ipCount)
console.log('decision time (decide() alone, µs)      calls     p50     p99    mean   verdict')
for (const [name, scenario] of Object.entries(scenarios)) {
  const decoded = decodeReview(Buffer.from(admissionReview(scenario.operation, scenario.name, [...scenario.cidrs], 'x')))
  if (!decoded.ok || !('request' in decoded)) throw new Error(`bad scenario ${name}`)
  const timing = timeDecisions(policy, state, decoded.request, 20_000)
  console.log(`  ${name.padEnd(36)} ${String(timing.calls).padStart(7)} ${timing.p50us.toFixed(1).padStart(7)} ${timing.p99us.toFixed(1).padStart(7)} ${timing.meanus.toFixed(1).padStart(7)}   ${timing.allowed ? 'allowed' : 'denied'}`)
}

// 3. HTTP load against the server in its own process
const dir = mkdtempSync(join(tmpdir(), 'scg-bench-'))
try {
  const cert = join(dir, 'tls.crt')
  const key = join(dir, 'tls.key')
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=localhost',
    '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1', '-keyout', key, '-out', cert], { stdio: 'ignore' })
  const server = fork(join(here, 'server.ts'), [cert, key, String(ipCount)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: ['--expose-gc'] })
  const port = await new Promise<number>((resolve, reject) => {
    server.once('message', (message) => { resolve((message as { port: number }).port) })
    server.once('exit', (code) => { reject(new Error(`bench server exited with ${code ?? 'signal'}`)) })
  })
  const origin = `https://127.0.0.1:${port}`
  const ca = readFileSync(cert, 'utf8')
  console.log('\nHTTPS reviews (server in its own process)   reviews/s   p50 ms   p99 ms   max ms   errors   answered')
  let index = 0
  for (const [name, scenario] of Object.entries(scenarios)) {
    const body = admissionReview(scenario.operation, scenario.name, [...scenario.cidrs], `bench-${index++}`)
    await load(origin, body, connections, Math.min(2, seconds), ca)
    const result = await load(origin, body, connections, seconds, ca)
    console.log(`  ${name.padEnd(42)} ${result.perSecond.toFixed(0).padStart(9)} ${result.p50ms.toFixed(2).padStart(8)} ${result.p99ms.toFixed(2).padStart(8)} ${result.maxms.toFixed(1).padStart(8)} ${String(result.errors).padStart(8)}   ${result.allowed} allowed, ${result.denied} denied`)
  }
  const usage = await new Promise<NodeJS.MemoryUsage>((resolve) => {
    server.once('message', (message) => { resolve((message as { memory: NodeJS.MemoryUsage }).memory) })
    server.send('memory')
  })
  console.log(`\nserver after the runs, after a full GC: heap used ${mib(usage.heapUsed)} MiB, rss ${mib(usage.rss)} MiB (1,001 ServiceCIDRs and ${ipCount.toLocaleString('en')} IPAddresses cached)`)
  server.send('stop')
  await new Promise((resolve) => server.once('exit', resolve))
} finally {
  rmSync(dir, { recursive: true, force: true })
}
