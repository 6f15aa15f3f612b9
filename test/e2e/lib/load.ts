// Steady review load for the fault specs (13-kind-faults): a few workers that each send, one after
// another, a dry-run create of a ServiceCIDR the policy admits. kube-apiserver runs admission for a
// dry run exactly as for a real create (the webhook is called, its decision applies) and stores
// nothing, so the load leaves no objects behind and can run for as long as a fault lasts.
//
// Every answer is classified:
// - admitted: the apiserver created the object (dry run);
// - failed review: the apiserver answered, and not with the admission: a webhook failure ("failed
//   calling webhook", a timeout), a denial of a range the policy admits, or any other error. This is
//   what a fault must never cause;
// - apiserver unavailable: no HTTP answer (connection refused or reset while kube-apiserver
//   restarts), 429/503 from an apiserver that is not serving yet, or a 403 from its authorizer
//   before its RBAC caches are filled after a restart ("User ... cannot create resource"): kube-
//   apiserver authorizes before it admits, so none of these reached admission. Not a review; a
//   client retries it.
// Each count is kept per window (before, during, after the fault), so a spec can show that reviews
// kept passing while the fault was under way.

import type { Cluster } from './kube.ts'
import { apiFailure, deniedPrefix } from './kube.ts'

export type LoadWindow = 'before' | 'during' | 'after'

export interface WindowCounts {
  sent: number
  admitted: number
  failedReviews: number
  apiserverUnavailable: number
}

export interface LoadReport {
  readonly windows: Readonly<Record<LoadWindow, WindowCounts>>
  readonly total: WindowCounts
  /** The first few failed reviews, as the apiserver worded them. */
  readonly failures: readonly string[]
}

export interface LoadOptions {
  /** The range every request asks for; the policy in force must admit it and nothing may overlap it. */
  readonly cidr: string
  readonly namePrefix: string
  readonly workers?: number
  /** The pause of each worker between two requests. */
  readonly pauseMs?: number
  /** A request with no answer after this long counts as a failed review. */
  readonly requestTimeoutMs?: number
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))
const empty = (): WindowCounts => ({ sent: 0, admitted: 0, failedReviews: 0, apiserverUnavailable: 0 })

export class ReviewLoad {
  private readonly cluster: Cluster
  private readonly options: Required<LoadOptions>
  private readonly windows: Record<LoadWindow, WindowCounts> = { before: empty(), during: empty(), after: empty() }
  private readonly failures: string[] = []
  private window: LoadWindow = 'before'
  private running = false
  private workers: Promise<void>[] = []
  private sequence = 0

  constructor(cluster: Cluster, options: LoadOptions) {
    this.cluster = cluster
    this.options = { workers: 2, pauseMs: 50, requestTimeoutMs: 30_000, ...options }
  }

  start(): void {
    if (this.running) throw new Error('the load is already running')
    this.running = true
    this.workers = Array.from({ length: this.options.workers }, () => this.work())
  }

  /** Counts from now on go to `window`; a request is counted in the window it was sent in. */
  enter(window: LoadWindow): void {
    this.window = window
  }

  /** Stops sending, waits for the requests in flight, and returns the counts. */
  async stop(): Promise<LoadReport> {
    this.running = false
    await Promise.all(this.workers)
    const total = empty()
    for (const counts of Object.values(this.windows)) {
      total.sent += counts.sent
      total.admitted += counts.admitted
      total.failedReviews += counts.failedReviews
      total.apiserverUnavailable += counts.apiserverUnavailable
    }
    return { windows: this.windows, total, failures: this.failures }
  }

  private async work(): Promise<void> {
    while (this.running) {
      const counts = this.windows[this.window]
      counts.sent++
      const outcome = await this.review()
      if (outcome === 'admitted') counts.admitted++
      else if (outcome === 'unavailable') counts.apiserverUnavailable++
      else {
        counts.failedReviews++
        if (this.failures.length < 10) this.failures.push(`${new Date().toISOString()} ${outcome.failed}`)
      }
      await sleep(this.options.pauseMs)
    }
  }

  private async review(): Promise<'admitted' | 'unavailable' | { failed: string }> {
    const name = `${this.options.namePrefix}-${String(++this.sequence)}`
    const request = this.cluster.net.createServiceCIDR({ body: { metadata: { name }, spec: { cidrs: [this.options.cidr] } }, dryRun: 'All' })
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => { reject(new Error(`no answer after ${String(this.options.requestTimeoutMs)} ms`)) }, this.options.requestTimeoutMs)
    })
    try {
      await Promise.race([request, timeout])
      return 'admitted'
    } catch (error) {
      const failed = apiFailure(error)
      if (failed === undefined) {
        const message = error instanceof Error ? error.message : String(error)
        return message.startsWith('no answer after') ? { failed: message } : 'unavailable'
      }
      const message = failed.status.message ?? ''
      if ((failed.code === 429 || failed.code === 503) && !message.includes('webhook')) return 'unavailable'
      if (failed.code === 403 && !message.startsWith(deniedPrefix) && message.includes('cannot create resource')) return 'unavailable'
      return { failed: `HTTP ${String(failed.code)}: ${message}` }
    } finally {
      clearTimeout(timer)
    }
  }
}
