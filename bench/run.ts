// `npm run bench`: prints what servicecidr-guard sustains on this machine. Figures, not a test.
//
//  1. heap held by a cache of 100,000 IPAddresses (fresh process, after GC)
//  2. decision time of decide() alone, per scenario, with 1,000 ServiceCIDRs and 100,000 IPAddresses
//  3. reviews/s and p50/p99 latency over HTTPS keep-alive, the load generated in this process and
//     the server in another (bench/server.ts)
//  4. side by side, same load generator and connections (8 and 32): the webhook app against an
//     empty fastify HTTPS handler that parses the same AdmissionReview and answers allowed
//     (bench/empty-server.ts), the webhook app again without the shared reservation Lease (serve
//     --no-shared-reservation), and with --baseline REF the webhook app of that commit too, with and
//     without the Lease (run by this bench/server.ts over that commit's src); BENCH_ROUNDS rounds
//     each (default 3), one server after another, the order reversed every other round, and the
//     ratios; with --baseline also this build's rounds divided by the baseline's of the same round;
//     with BENCH_SETS above 1, all of that again with every server started afresh, BENCH_SETS times,
//     and the ratios summarised over the sets (a process has a speed of its own)
//
//   npm run bench [-- --baseline REF]
//
// BENCH_SECONDS (default 10), BENCH_CONNECTIONS (default 8), BENCH_ROUNDS (default 3) and
// BENCH_SETS (default 1) tune the HTTP runs; BENCH_PORT (first of six) the servers' ports
// (default: any free ones).
// BENCH_SIDE_BY_SIDE_ONLY=1 runs only 4 (the side-by-side rounds), for comparing builds.
// BENCH_EDGE_ROW=1 adds to 4 the webhook app answering every review with one decision made at
// start-up (the edge row): the HTTP edge, log line and metrics alone, to tell their cost from the
// decision's.
// BENCH_WARMUP_SECONDS: how long each server is loaded before them (default 10).

import { execFileSync, fork, spawnSync, type ChildProcess } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { parseArgs } from 'node:util'
import { parsePolicy } from '../src/config/policy.ts'
import { timeDecisions } from './decide.ts'
import { admissionReview, benchPolicy, buildState, scenarios, sideBySideReview } from './fixtures.ts'
import { load, type LoadResult } from './load.ts'
import { checkoutOf, deploymentNodeOptions, imageNodeFlags, repo } from './replica.ts'
import { median } from './stats.ts'

const { values: flags } = parseArgs({ options: { baseline: { type: 'string' } } })
const seconds = Number(process.env['BENCH_SECONDS'] ?? 10)
const connections = Number(process.env['BENCH_CONNECTIONS'] ?? 8)
const ipCount = 100_000
const here = import.meta.dirname
const mib = (bytes: number): string => (bytes / 1024 / 1024).toFixed(1)

/**
 * The guest's idle polling, where the kernel has the haltpoll cpuidle driver (a VM). With it at 0, an
 * idle vCPU halts at once, and waking a process that sleeps there costs the waker an IPI and its VM
 * exit: a server pays that for every burst of answers to a load generator that went idle waiting for
 * it, so a slower server pays it more often, and its ratio to a faster one falls further than its
 * own work explains (docs/benchmarks.md, "Fifteenth pass"). Printed so that figures from machines
 * set differently are not compared as if alike.
 */
function idlePolling(): string | undefined {
  const read = (path: string): string | undefined => {
    try {
      return readFileSync(path, 'utf8').trim()
    } catch {
      return undefined
    }
  }
  const driver = read('/sys/devices/system/cpu/cpuidle/current_driver')
  const pollNs = read('/sys/module/haltpoll/parameters/guest_halt_poll_ns')
  if (driver === undefined) return undefined
  // 200,000 is the default of drivers/cpuidle/governors/haltpoll.c.
  return pollNs === undefined ? `cpuidle: ${driver}` : `cpuidle: ${driver}, guest_halt_poll_ns ${pollNs} (Linux's default: 200000)`
}

console.log(`servicecidr-guard benchmark — Node ${process.version}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}`)
const idle = idlePolling()
if (idle !== undefined) console.log(idle)
console.log(`cluster: 1,001 ServiceCIDRs, ${ipCount.toLocaleString('en')} IPAddresses; HTTP: ${connections} keep-alive connections, ${seconds} s a scenario\n`)

const sideBySideOnly = process.env['BENCH_SIDE_BY_SIDE_ONLY'] === '1'

// 1. Memory
function memoryFigures(): void {
  const memory = spawnSync(process.execPath, ['--expose-gc', join(here, 'memory.ts'), String(ipCount)], { encoding: 'utf8' })
  if (memory.status !== 0) throw new Error(`memory benchmark failed: ${memory.stderr}`)
  const held = JSON.parse(memory.stdout) as { count: number, heapBytes: number }
  console.log(`cache of ${held.count.toLocaleString('en')} IPAddresses: ${mib(held.heapBytes)} MiB of heap (${(held.heapBytes / held.count).toFixed(0)} bytes each)\n`)
}

// 2. Decision time
function decisionFigures(): void {
  const policy = parsePolicy(benchPolicy, 'bench')
  const state = buildState(1000, ipCount)
  console.log('decision time (decide() alone, µs)      calls     p50     p99    mean   verdict')
  for (const [name, scenario] of Object.entries(scenarios)) {
    const object = { name: scenario.name, cidrs: [...scenario.cidrs] }
    const request = { operation: scenario.operation, name: scenario.name, userInfo: { username: 'kubernetes-admin', groups: ['system:authenticated'] }, object: scenario.operation === 'DELETE' ? undefined : object, oldObject: scenario.operation === 'DELETE' ? object : undefined, dryRun: false }
    const timing = timeDecisions(policy, state, request, 20_000)
    console.log(`  ${name.padEnd(36)} ${String(timing.calls).padStart(7)} ${timing.p50us.toFixed(1).padStart(7)} ${timing.p99us.toFixed(1).padStart(7)} ${timing.meanus.toFixed(1).padStart(7)}   ${timing.allowed ? 'allowed' : 'denied'}`)
  }
}

if (!sideBySideOnly) {
  memoryFigures()
  decisionFigures()
}

// 3. HTTP load against the server in its own process
const dir = mkdtempSync(join(tmpdir(), 'scg-bench-'))
const started = (child: ChildProcess): Promise<number> => new Promise((resolve, reject) => {
  child.once('message', (message) => { resolve((message as { port: number }).port) })
  child.once('exit', (code) => { reject(new Error(`bench server exited with ${code ?? 'signal'}`)) })
})
/** The child's CPU time so far (user + system), in microseconds. */
const cpuOf = (child: ChildProcess): Promise<number> => new Promise((resolve) => {
  const onMessage = (message: unknown): void => {
    const usage = (message as { cpu?: NodeJS.CpuUsage }).cpu
    if (usage === undefined) return
    child.off('message', onMessage)
    resolve(usage.user + usage.system)
  }
  child.on('message', onMessage)
  child.send('cpu')
})
const stopped = async (child: ChildProcess): Promise<void> => {
  child.send('stop')
  await new Promise((resolve) => child.once('exit', resolve))
}
const basePort = process.env['BENCH_PORT']
const children: ChildProcess[] = []
try {
  const cert = join(dir, 'tls.crt')
  const key = join(dir, 'tls.key')
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=localhost',
    '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1', '-keyout', key, '-out', cert], { stdio: 'ignore' })
  // BENCH_NODE_ARGS: extra node flags for the webhook server, e.g. --cpu-prof --cpu-prof-dir=DIR.
  const nodeArgs = (process.env['BENCH_NODE_ARGS'] ?? '').split(' ').filter((arg) => arg !== '')
  const port = (offset: number): string => (basePort === undefined ? '0' : String(Number(basePort) + offset))
  // Every server runs with its build's Deployment NODE_OPTIONS (heap sizes) and its image's node
  // flags (the young generation collected on the main thread), as a replica does; the empty
  // handler too, so that the two differ by their code alone.
  const forkServer = (checkout: string, script: string, args: string[], execArgv: string[] = [], env: Record<string, string> = {}): ChildProcess => {
    const child = fork(join(checkout, 'bench', script), [cert, key, ...args], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [...imageNodeFlags(checkout), ...execArgv], env: { ...process.env, ...env, NODE_OPTIONS: deploymentNodeOptions(checkout) } })
    children.push(child)
    return child
  }
  const ca = readFileSync(cert, 'utf8')
  if (!sideBySideOnly) {
    const server = forkServer(repo, 'server.ts', [String(ipCount), port(0)], ['--expose-gc', ...nodeArgs])
    const origin = `https://127.0.0.1:${await started(server)}`
    console.log('\nHTTPS reviews (server in its own process)   reviews/s   p50 ms   p99 ms   max ms   errors   answered')
    let index = 0
    for (const [name, scenario] of Object.entries(scenarios)) {
      const body = admissionReview(scenario.operation, scenario.name, [...scenario.cidrs], `bench-${index++}`)
      await load(origin, body, connections, Math.min(2, seconds), ca)
      const result = await load(origin, body, connections, seconds, ca)
      console.log(`  ${name.padEnd(42)} ${result.perSecond.toFixed(0).padStart(9)} ${result.p50ms.toFixed(2).padStart(8)} ${result.p99ms.toFixed(2).padStart(8)} ${result.maxms.toFixed(1).padStart(8)} ${String(result.errors).padStart(8)}   ${result.allowed} allowed, ${result.denied} denied`)
    }
    await stopped(server)
  }

  // 4. Side by side with the empty handler (and the baseline's webhook), in BENCH_SETS sets of
  // processes: every server started afresh for each set.
  let checkout: string | undefined
  if (flags.baseline !== undefined) {
    // That commit's src under this harness: the same bench/server.ts and fixtures, and the same
    // in-memory Lease standing in for kube-apiserver, copied in; with and without the shared
    // reservation Lease, as this build's two webhook rows.
    checkout = checkoutOf(flags.baseline, dir)
    for (const file of ['bench/server.ts', 'bench/fixtures.ts', 'test/support/lease-store.ts']) {
      mkdirSync(dirname(join(checkout, file)), { recursive: true })
      copyFileSync(join(repo, file), join(checkout, file))
    }
  }
  const baselineName = `baseline ${flags.baseline ?? ''}`
  /** This build's webhook rows, each with the baseline's row of the same path. */
  const counterparts = new Map([['webhook', baselineName], ['webhook, no shared Lease', 'baseline, no shared Lease']])
  /** The servers of one set, in their own processes, started and listening: name, origin, process. */
  const startSet = async (): Promise<[string, string, ChildProcess][]> => {
    const servers: [string, ChildProcess][] = [
      ['empty', forkServer(repo, 'empty-server.ts', [port(1)])],
      ['webhook', forkServer(repo, 'server.ts', [String(ipCount), port(0)], ['--expose-gc', ...nodeArgs])],
      // The same webhook with admitted ranges reserved on this replica only (serve
      // --no-shared-reservation): what the shared reservation Lease adds to a review, in the same run.
      ['webhook, no shared Lease', forkServer(repo, 'server.ts', [String(ipCount), port(3)], ['--expose-gc'], { BENCH_SHARED_RESERVATION: '0' })],
    ]
    if (process.env['BENCH_EDGE_ROW'] === '1') servers.push(['webhook edge (no decision)', forkServer(repo, 'server.ts', [String(ipCount), port(5)], ['--expose-gc'], { BENCH_REVIEWER: 'constant' })])
    if (checkout !== undefined) {
      servers.push([baselineName, forkServer(checkout, 'server.ts', [String(ipCount), port(2)], ['--expose-gc'])])
      servers.push(['baseline, no shared Lease', forkServer(checkout, 'server.ts', [String(ipCount), port(4)], ['--expose-gc'], { BENCH_SHARED_RESERVATION: '0' })])
    }
    const ports = await Promise.all(servers.map(([, child]) => started(child)))
    return servers.map(([name, child], index) => [name, `https://127.0.0.1:${ports[index] ?? 0}`, child])
  }
  const { createAllowed } = scenarios
  const body = sideBySideReview()
  const warmup = Number(process.env['BENCH_WARMUP_SECONDS'] ?? 10)
  const rounds = Number(process.env['BENCH_ROUNDS'] ?? 3)
  const sets = Number(process.env['BENCH_SETS'] ?? 1)
  const counts = [8, 32]
  /** Per connection count, per server, each set's figures against the empty handler's of that set. */
  const summary = new Map(counts.map((count) => [count, new Map<string, { throughput: number, p99: number, cpuVsBaseline: number }[]>()]))
  let last: [string, string, ChildProcess][] = []
  for (let set = 1; set <= sets; set++) {
    const targets = await startSet()
    // Every server is warmed first, long enough for V8 to finish optimizing the review path: the
    // webhook's JIT was still compiling 20-70 functions a second, on the other core, 8 s into its
    // load (--trace-opt), and its first rounds measured that warm-up (docs/benchmarks.md, "Fifth
    // pass"). A replica runs for days; what is compared is its steady state.
    for (const [, target] of targets) await load(target, body, connections, warmup, ca)
    console.log(`\nside by side${sets > 1 ? `, set ${String(set)} of ${String(sets)}` : ''}, ${createAllowed.operation} admitted (createAllowed), same load generator; each server warmed ${warmup} s, then ${String(rounds)} rounds each, alternating, ${seconds} s a round`)
    console.log('  server                     connections   reviews/s   p99 ms   CPU µs a review   vs empty: throughput   p99     CPU')
    for (const count of counts) {
      const runs = new Map<string, { result: LoadResult, cpu: number }[]>(targets.map(([name]) => [name, []]))
      for (let round = 0; round < rounds; round++) {
        // Every other round in reverse order: no server always follows the same one.
        for (const [name, target, child] of round % 2 === 0 ? targets : [...targets].reverse()) {
          await load(target, body, count, Math.min(2, seconds), ca)
          const before = await cpuOf(child)
          const result = await load(target, body, count, seconds, ca)
          const cpu = (await cpuOf(child)) - before
          if (result.errors > 0 || result.allowed !== result.requests) throw new Error(`${name}: ${result.errors} errors, ${result.allowed} of ${result.requests} allowed`)
          runs.get(name)?.push({ result, cpu: cpu / result.requests })
        }
      }
      const mean = (name: string, pick: (run: { result: LoadResult, cpu: number }) => number): number => {
        const list = runs.get(name) ?? []
        return list.reduce((sum, run) => sum + pick(run), 0) / list.length
      }
      const rate = (name: string): number => mean(name, (run) => run.result.perSecond)
      const p99 = (name: string): number => mean(name, (run) => run.result.p99ms)
      const cpu = (name: string): number => mean(name, (run) => run.cpu)
      for (const [name] of targets) {
        const versus = name === 'empty' ? '' : `${(rate(name) / rate('empty')).toFixed(2).padStart(20)}x ${(p99(name) / p99('empty')).toFixed(2).padStart(6)}x ${(cpu(name) / cpu('empty')).toFixed(2).padStart(6)}x`
        console.log(`  ${name.padEnd(26)} ${String(count).padStart(11)} ${rate(name).toFixed(0).padStart(11)} ${p99(name).toFixed(2).padStart(8)} ${cpu(name).toFixed(0).padStart(17)} ${versus}`)
        if (name === 'empty') continue
        const counterpart = counterparts.get(name)
        const cpuVsBaseline = counterpart !== undefined && runs.has(counterpart) ? cpu(name) / cpu(counterpart) : Number.NaN
        const byServer = summary.get(count)
        const figures = byServer?.get(name) ?? []
        figures.push({ throughput: rate(name) / rate('empty'), p99: p99(name) / p99('empty'), cpuVsBaseline })
        byServer?.set(name, figures)
      }
      // This build against the baseline round by round, each of its rounds divided by the baseline's
      // in the same round: the machine's drift between rounds, which moves a row of one run by up to
      // 0.1x, cancels. A process's own speed does not: two processes of the same code differed by
      // about a tenth, round after round (docs/benchmarks.md, "Ninth pass"), so one set compares one
      // pair of processes; BENCH_SETS compares several.
      for (const [mine, theirs] of counterparts) {
        const ours = runs.get(mine) ?? []
        const base = runs.get(theirs)
        if (base === undefined) continue
        const throughput = ours.map((run, round) => run.result.perSecond / (base[round]?.result.perSecond ?? Number.NaN))
        const cpuRatios = ours.map((run, round) => run.cpu / (base[round]?.cpu ?? Number.NaN))
        console.log(`  ${mine} / ${theirs}, round by round (median): throughput ${median(throughput).toFixed(2)}x, CPU a review ${median(cpuRatios).toFixed(2)}x, lower in ${String(cpuRatios.filter((ratio) => ratio < 1).length)} of ${String(rounds)} rounds`)
      }
    }
    // The last set's servers stay up for the memory figure below.
    if (set < sets) await Promise.all(targets.map(([, , child]) => stopped(child)))
    else last = targets
  }
  if (sets > 1) {
    // Each set's ratio is one pair of processes' (above); across sets, a process's own speed
    // averages out. Medians, the range, and in how many sets the goal was met.
    console.log(`\nover ${String(sets)} sets of processes (each set's ratio of means against that set's empty handler): median (min-max)`)
    console.log(`  server                     connections   throughput vs empty    p99 vs empty          goal met${checkout === undefined ? '' : '   CPU vs baseline, lower in'}`)
    const span = (values: number[]): string => `${median(values).toFixed(2)}x (${Math.min(...values).toFixed(2)}-${Math.max(...values).toFixed(2)})`
    for (const [count, byServer] of summary) {
      for (const [name, list] of byServer) {
        const met = list.filter((figures) => figures.throughput >= 0.7 && figures.p99 <= 1.3).length
        const versus = list.map((figures) => figures.cpuVsBaseline).filter((ratio) => !Number.isNaN(ratio))
        const baselineColumn = versus.length === 0 ? '' : `${median(versus).toFixed(2)}x, ${String(versus.filter((ratio) => ratio < 1).length)} of ${String(versus.length)}`
        console.log(`  ${name.padEnd(26)} ${String(count).padStart(11)}   ${span(list.map((figures) => figures.throughput)).padEnd(20)} ${span(list.map((figures) => figures.p99)).padEnd(20)} ${`${String(met)} of ${String(list.length)}`.padStart(9)}   ${baselineColumn}`)
      }
    }
  }
  console.log('  (the goal: the webhook at >= 0.7x the empty handler\'s throughput and <= 1.3x its p99. CPU µs: the server process\'s CPU time per review)')

  const webhook = last.find(([name]) => name === 'webhook')?.[2]
  if (webhook !== undefined) {
    const usage = await new Promise<NodeJS.MemoryUsage>((resolve) => {
      webhook.once('message', (message) => { resolve((message as { memory: NodeJS.MemoryUsage }).memory) })
      webhook.send('memory')
    })
    console.log(`\nserver after the runs, after a full GC: heap used ${mib(usage.heapUsed)} MiB, rss ${mib(usage.rss)} MiB (1,001 ServiceCIDRs and ${ipCount.toLocaleString('en')} IPAddresses cached)`)
  }
  await Promise.all(last.map(([, , child]) => stopped(child)))
} finally {
  // On a failure, no server is left running.
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill()
  rmSync(dir, { recursive: true, force: true })
}
