// The server under load: the real webhook app (fastify, HTTPS, pino logging each decision, admitted
// ranges recorded in a shared reservation Lease held in memory) over a synthetic cluster, in its own
// process. Started by bench/run.ts, which sends it the load.

// Loaded as serve loads it (its cache's reflectors and the Lease's client use it): ~24 MiB of heap
// that every replica holds. Only the Lease's client loaded it here before, so the server without
// the shared Lease was lighter than any replica. A larger heap costs a review CPU while full
// collections run (docs/benchmarks.md, "Twenty-first pass"; the twenty-second found what ran them).
import '@kubernetes/client-node'
import { readFileSync } from 'node:fs'
import { pino, type Logger } from 'pino'
import { createReviewer, type ReservationPort, type Reviewer } from '../src/admission/reviewer.ts'
import { parsePolicy } from '../src/config/policy.ts'
import { buildWebhookApp, type DecisionLog } from '../src/server/app.ts'
import { checkKeyPair, secureContextOptions } from '../src/server/certificate.ts'
import { Metrics } from '../src/server/metrics.ts'
import { benchPolicy, buildState, sideBySideReview } from './fixtures.ts'

const [certPath, keyPath, ipCount, port] = process.argv.slice(2)
const state = buildState(1000, Number(ipCount ?? 100_000))
const policy = parsePolicy(benchPolicy, 'bench')
// Decisions are logged as the build's own serve command logs them, to /dev/null so the terminal is
// not the bottleneck: src/cli/logger.ts, or pino's default destination in builds from before it
// (bench/run.ts runs this file over an older checkout for --baseline).
async function buildLogger(): Promise<{ logger: Logger, decisions?: DecisionLog | undefined }> {
  try {
    const { serverLogger } = await import('../src/cli/logger.ts')
    return serverLogger('info', '/dev/null')
  } catch {
    return { logger: pino({ level: 'info', base: { service: 'servicecidr-guard' } }, pino.destination({ dest: '/dev/null', sync: false })) }
  }
}
const { logger, decisions } = await buildLogger()
const metrics = new Metrics({ state, synced: () => true, relists: () => 0 })
// An admitted CREATE is recorded in the shared reservation Lease, as serve does by default, but in
// the unit tests' in-memory Lease (test/support/lease-store.ts): the review path's own work (queue,
// recheck, the annotation written) without kube-apiserver's round trip, which is not the webhook's
// CPU. Builds from before the shared Lease have no such step; BENCH_SHARED_RESERVATION=0 leaves it
// out, as serve --no-shared-reservation does.
async function buildReservations(): Promise<ReservationPort | undefined> {
  if (process.env['BENCH_SHARED_RESERVATION'] === '0') return undefined
  try {
    const { SharedReservations } = await import('../src/cluster/reservations.ts')
    const { MemoryLeaseStore } = await import('../test/support/lease-store.ts')
    return new SharedReservations({ store: new MemoryLeaseStore(), replica: 'bench', ttlMs: 10_000, deadlineMs: 3_000, log: logger, events: metrics.reservationEvents() })
  } catch {
    return undefined
  }
}
const reviewer = createReviewer({
  policy: () => policy,
  cluster: { view: () => state, current: () => Promise.resolve(), reserve: (record) => { state.reserve(record, Date.now() + 10_000) }, release: (record) => { state.release(record) } },
  reservations: await buildReservations(),
})
// As serve does once the cache has first synced, before the replica is ready (src/server/heap.ts);
// builds from before it take reviews with the start-up's garbage still being marked.
try {
  const { collectStartupGarbage } = await import('../src/server/heap.ts')
  collectStartupGarbage()
} catch (error) {
  // Only a build from before src/server/heap.ts goes without.
  if ((error as { code?: unknown }).code !== 'ERR_MODULE_NOT_FOUND') throw error
}
// BENCH_REVIEWER=constant: every review is answered with the outcome this reviewer gave the
// side-by-side review once, here (bench/run.ts's edge row, BENCH_EDGE_ROW=1). What is left is the
// HTTP edge with its limits, the log line, the metrics and the answer's JSON, without decoding,
// deciding or reserving: the part of a review's cost that is not the decision.
async function constantReviewer(): Promise<Reviewer> {
  const outcome = await reviewer(Buffer.from(sideBySideReview()))
  // At once, as the reviewer answers a review that waits for nothing (since the thirty-fifth pass).
  return () => outcome
}
const answering = process.env['BENCH_REVIEWER'] === 'constant' ? await constantReviewer() : reviewer
const pair = checkKeyPair(readFileSync(certPath!), readFileSync(keyPath!))
const app = buildWebhookApp({ logger, decisions, metrics, reviewer: answering, https: secureContextOptions(pair), health: { readiness: () => ({ ready: true, checks: {} }) } })
await app.listen({ host: '127.0.0.1', port: Number(port ?? 0) })
const address = app.server.address()
process.send?.({ port: typeof address === 'object' && address !== null ? address.port : 0 })
process.on('message', (message) => {
  if (message === 'cpu') process.send?.({ cpu: process.cpuUsage() })
  if (message === 'memory') {
    // What the server holds, not what it has yet to collect (run with --expose-gc).
    ;(globalThis as { gc?: () => void }).gc?.()
    process.send?.({ memory: process.memoryUsage() })
  }
  if (message === 'stop') void app.close().then(() => process.exit(0))
})
