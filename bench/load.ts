// A closed-loop load generator: `connections` keep-alive HTTPS connections, each sending the next
// request as soon as the last answered, for `seconds`. Every latency is kept, so percentiles are
// exact rather than bucketed.

import { Pool } from 'undici'
import { percentile } from './stats.ts'

export interface LoadResult {
  readonly requests: number
  readonly errors: number
  readonly seconds: number
  readonly perSecond: number
  readonly p50ms: number
  readonly p99ms: number
  readonly maxms: number
  /** What the server answered, by verdict, to prove the scenario did what it says. */
  readonly allowed: number
  readonly denied: number
}

export async function load(origin: string, body: string, connections: number, seconds: number, ca: string): Promise<LoadResult> {
  const pool = new Pool(origin, { connections, pipelining: 1, connect: { ca, servername: 'localhost' } })
  const latencies: number[] = []
  let errors = 0
  let allowed = 0
  let denied = 0
  const started = performance.now()
  const deadline = started + seconds * 1000
  const worker = async (): Promise<void> => {
    while (performance.now() < deadline) {
      const sent = performance.now()
      try {
        const response = await pool.request({ path: '/validate', method: 'POST', headers: { 'content-type': 'application/json' }, body })
        const text = await response.body.text()
        latencies.push(performance.now() - sent)
        if (response.statusCode !== 200) errors++
        else if (text.includes('"allowed":true')) allowed++
        else denied++
      } catch {
        errors++
      }
    }
  }
  await Promise.all(Array.from({ length: connections }, worker))
  const elapsed = (performance.now() - started) / 1000
  await pool.close()
  const sorted = Float64Array.from(latencies).sort()
  return {
    requests: latencies.length,
    errors,
    seconds: elapsed,
    perSecond: latencies.length / elapsed,
    p50ms: percentile(sorted, 50),
    p99ms: percentile(sorted, 99),
    maxms: sorted.length > 0 ? sorted[sorted.length - 1]! : Number.NaN,
    allowed,
    denied,
  }
}
