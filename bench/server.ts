// The server under load: the real webhook app (fastify, HTTPS, pino logging each decision) over a
// synthetic cluster, in its own process. Started by bench/run.ts, which sends it the load.

import { readFileSync } from 'node:fs'
import { pino } from 'pino'
import { createReviewer } from '../src/admission/reviewer.ts'
import { parsePolicy } from '../src/config/policy.ts'
import { buildWebhookApp } from '../src/server/app.ts'
import { checkKeyPair, secureContextOptions } from '../src/server/certificate.ts'
import { Metrics } from '../src/server/metrics.ts'
import { benchPolicy, buildState } from './fixtures.ts'

const [certPath, keyPath, ipCount] = process.argv.slice(2)
const state = buildState(1000, Number(ipCount ?? 100_000))
const policy = parsePolicy(benchPolicy, 'bench')
// Decisions are logged as in production, to /dev/null so the terminal is not the bottleneck.
const logger = pino({ level: 'info' }, pino.destination({ dest: '/dev/null', sync: false }))
const metrics = new Metrics({ state, synced: () => true, relists: () => 0 })
const reviewer = createReviewer({
  policy: () => policy,
  cluster: { view: () => state, current: () => Promise.resolve(), reserve: (record) => { state.reserve(record, Date.now() + 10_000) }, release: (record) => { state.release(record) } },
})
const pair = checkKeyPair(readFileSync(certPath!), readFileSync(keyPath!))
const app = buildWebhookApp({ logger, metrics, reviewer, https: secureContextOptions(pair), health: { readiness: () => ({ ready: true, checks: {} }) } })
await app.listen({ host: '127.0.0.1', port: 0 })
const address = app.server.address()
process.send?.({ port: typeof address === 'object' && address !== null ? address.port : 0 })
process.on('message', (message) => {
  if (message === 'memory') {
    // What the server holds, not what it has yet to collect (run with --expose-gc).
    ;(globalThis as { gc?: () => void }).gc?.()
    process.send?.({ memory: process.memoryUsage() })
  }
  if (message === 'stop') void app.close().then(() => process.exit(0))
})
