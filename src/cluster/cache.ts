// The webhook's view of the cluster: ServiceCIDRs and IPAddresses kept current by two reflectors,
// held as small records in a ClusterState. Decisions read it from memory; nothing LISTs per request.

import type { KubeConfig } from '@kubernetes/client-node'
import { ClusterState, StringPool, toIPAddressRecord, toServiceCIDRRecord } from '../policy/state.ts'
import type { ClusterView, IPAddressRecord, ServiceCIDRRecord } from '../policy/types.ts'
import { discoverVersion, group } from './api.ts'
import { Backoff, Reflector, resumeWatchSeconds, sleep, type Log, type ReflectorSink } from './reflector.ts'

export interface ClusterCacheOptions {
  readonly kubeConfig: KubeConfig
  readonly log: Log
  readonly now?: () => number
  /** How long an admitted CREATE is remembered if the watch never shows it (it may have failed later). */
  readonly reservationMs?: number
  /** Called with each ServiceCIDR the list or the watch shows (the shared reservations end theirs). */
  readonly onServiceCIDR?: (record: ServiceCIDRRecord) => void
  /** How long the view may go without being shown current (Reflector.staleFor) before the replica is Stale (not ready). */
  readonly staleAfterMs?: number
  /**
   * How long the view may go without being shown current before reviews stop trusting it, though the
   * replica is still Synced (reviewStaleAfterMs in src/server/serve.ts); at most staleAfterMs.
   */
  readonly reviewStaleAfterMs?: number
  /** How long current() waits for a view that is not current (default defaultCurrentWaitMs; see current()). */
  readonly currentWaitMs?: number
  /** Each watch's timeoutSeconds (default: watchSecondsWithin the time reviews trust a view). */
  readonly watchSeconds?: number
  /**
   * How long one API discovery attempt may take before it is given up and tried again (default
   * 60 s, kube-apiserver's own request timeout): undici would wait 5 minutes on a connection to an
   * apiserver that is gone, and the replica would stay unready all that time.
   */
  readonly discoveryTimeoutMs?: number
  /**
   * Called once, when both reflectors have first listed, in the turn the second list completes:
   * nothing that reads readiness or the view runs between that list and the call. What it throws
   * is logged, and the cache goes on: it is not the list's failure.
   */
  readonly onFirstSync?: () => void
}

/**
 * The timeoutSeconds of each watch, so that a quiet view is shown current more often than reviews
 * stop trusting it: kube-apiserver ends each watch at its timeout, and the next begins. Measured
 * against kube-apiserver v1.37.2, a quiet view was at most the timeout old (4,000 ms over 60 s with
 * a timeout of 4 s: no bookmark came before it), so the timeout keeps 2 s for the next watch to
 * begin under load: `reviewStaleAfterMs` less 2 s, between 1 and 25 s; 3 s with serve's defaults,
 * a watch request every 3 s for each of the two resources.
 */
export function watchSecondsWithin(reviewStaleAfterMs: number): number {
  return Math.min(25, Math.max(1, Math.ceil(reviewStaleAfterMs / 1000) - 2))
}

/**
 * How long current() waits by default. The first proof after an outage that the view is current
 * is the end of the watch a review woke, which asks kube-apiserver for resumeWatchSeconds (1 s) in
 * a quiet cluster. A wait of exactly that (1,000 ms, before) ended just before it: a review that
 * woke the watch after a kube-apiserver restart was refused (the e2e suite's 05-faults, once in
 * CI). 500 ms more for that watch's request and the end of its answer. With the shared
 * reservation's deadline (3 s), a review still ends inside the webhook's timeoutSeconds (5 s).
 */
const defaultCurrentWaitMs = resumeWatchSeconds * 1000 + 500

export type SyncState = 'Discovering' | 'Syncing' | 'Synced' | 'Stale' | 'Stopped'

function serviceCIDRSink(state: ClusterState, seen: (record: ServiceCIDRRecord) => void): ReflectorSink<ServiceCIDRRecord> {
  return {
    project: toServiceCIDRRecord,
    replace: (records) => {
      state.replaceServiceCIDRs(records)
      for (const record of records) seen(record)
    },
    upsert: (record) => {
      state.upsertServiceCIDR(record)
      seen(record)
    },
    remove: (item) => {
      if (item.metadata?.name) state.removeServiceCIDR(item.metadata.name)
    },
  }
}

function ipAddressSink(state: ClusterState, pool: StringPool): ReflectorSink<IPAddressRecord> {
  return {
    project: (item) => toIPAddressRecord(item, pool),
    replace: (records) => {
      state.replaceIPAddresses(records)
    },
    upsert: (record) => {
      state.upsertIPAddress(record)
    },
    remove: (item) => {
      if (item.metadata?.name) state.removeIPAddress(item.metadata.name)
    },
  }
}

export class ClusterCache {
  readonly state = new ClusterState()
  private readonly strings = new StringPool()
  private readonly options: ClusterCacheOptions
  private readonly now: () => number
  private reflectors: (Reflector<ServiceCIDRRecord> | Reflector<IPAddressRecord>)[] = []
  /** Aborted by stop(): ends discovery in flight and the wait before its next attempt. */
  private readonly stopping = new AbortController()
  private starting: Promise<void> | undefined
  private firstSynced = false
  version: string | undefined
  private discoveryError: string | undefined

  constructor(options: ClusterCacheOptions) {
    this.options = options
    this.now = options.now ?? Date.now
  }

  /** A method, not a getter: it changes across the awaits of discovery, where TypeScript would narrow a property. */
  private stopped(): boolean {
    return this.stopping.signal.aborted
  }

  /** Discovers the API version (retrying until the API is served), then starts both reflectors. */
  start(): Promise<void> {
    this.starting ??= this.discoverAndStart()
    return this.starting
  }

  private async discoverAndStart(): Promise<void> {
    const { kubeConfig, log } = this.options
    const timeoutMs = this.options.discoveryTimeoutMs ?? 60_000
    const backoff = new Backoff(500, 30_000)
    while (!this.stopped() && this.version === undefined) {
      const timeout = AbortSignal.timeout(timeoutMs)
      try {
        this.version = await discoverVersion(kubeConfig, AbortSignal.any([this.stopping.signal, timeout]))
        this.discoveryError = undefined
      } catch (error) {
        if (this.stopped()) break
        const reason = error instanceof Error ? error.message : String(error)
        this.discoveryError = timeout.aborted ? `ServiceCIDR API discovery: no answer from kube-apiserver within ${String(timeoutMs / 1000)} s` : reason
        log.warn({ err: error, retryInMs: backoff.ms }, 'ServiceCIDR API discovery failed; retrying')
        await sleep(backoff.ms, this.stopping.signal)
        backoff.grow()
      }
    }
    const version = this.version
    if (this.stopped() || version === undefined) return
    log.info({ group, version }, 'watching ServiceCIDRs and IPAddresses')
    const common = {
      kubeConfig,
      log,
      now: this.now,
      watchSeconds: this.options.watchSeconds ?? watchSecondsWithin(this.reviewStaleAfterMs),
      onListed: () => {
        if (this.firstSynced || !this.reflectors.every((reflector) => reflector.synced)) return
        this.firstSynced = true
        try {
          this.options.onFirstSync?.()
        } catch (error) {
          log.warn({ err: error }, 'onFirstSync failed')
        }
      },
    }
    this.reflectors = [
      new Reflector({ ...common, resource: { group, version, plural: 'servicecidrs' }, sink: serviceCIDRSink(this.state, this.options.onServiceCIDR ?? (() => undefined)) }),
      new Reflector({ ...common, resource: { group, version, plural: 'ipaddresses' }, sink: ipAddressSink(this.state, this.strings) }),
    ]
    for (const reflector of this.reflectors) reflector.start()
  }

  async stop(): Promise<void> {
    this.stopping.abort()
    await Promise.all(this.reflectors.map((reflector) => reflector.stop()))
  }

  get syncState(): SyncState {
    return this.stateWithin(this.options.staleAfterMs ?? 30_000)
  }

  /** The state, counting the view Stale once a reflector has not shown it current for longer than `staleAfterMs`. */
  private stateWithin(staleAfterMs: number): SyncState {
    if (this.stopped()) return 'Stopped'
    if (this.reflectors.length === 0) return 'Discovering'
    if (!this.reflectors.every((reflector) => reflector.synced)) return 'Syncing'
    const now = this.now()
    return this.reflectors.some((reflector) => reflector.staleFor(now) > staleAfterMs) ? 'Stale' : 'Synced'
  }

  /** Why the view is not current, if a request failed: discovery's error, else a list's or a watch's. */
  get lastError(): string | undefined {
    return this.discoveryError ?? this.reflectors.find((reflector) => reflector.lastError !== undefined)?.lastError
  }

  get synced(): boolean {
    return this.syncState === 'Synced'
  }

  /** How long a review may trust the view without its being shown current (reviewStaleAfterMs, at most staleAfterMs). */
  private get reviewStaleAfterMs(): number {
    const staleAfterMs = this.options.staleAfterMs ?? 30_000
    return Math.min(staleAfterMs, this.options.reviewStaleAfterMs ?? staleAfterMs)
  }

  /** Synced, and every watch shown current within the time a review may trust the view. */
  private get reviewable(): boolean {
    return this.stateWithin(this.reviewStaleAfterMs) === 'Synced'
  }

  /** The view decisions read; undefined while it cannot be trusted, so rules fail closed. */
  view(): ClusterView | undefined {
    // A review is proof that kube-apiserver answers (it is the caller): a reflector waiting out
    // the back-off of an outage that has ended retries now. Not only when the view is stale (then
    // current() waits for it): it counts as current for staleAfterMs after its watch ended, and
    // must not lag kube-apiserver that long.
    for (const reflector of this.reflectors) reflector.wake()
    if (!this.reviewable) return undefined
    this.state.expireReservations(this.now())
    return this.state
  }

  /**
   * Resolves once the view can be trusted, or after currentWaitMs. A review that finds the view
   * stale or still syncing has woken the reflectors waiting out a retry back-off (view()), and
   * waits for them here, briefly (defaultCurrentWaitMs): inside the webhook's timeoutSeconds (5 s)
   * with the shared reservation's deadline (3 s). Without this, the first reviews after a
   * kube-apiserver restart longer than staleAfterMs are refused as "not finished reading" until the
   * back-off ends.
   */
  async current(): Promise<void> {
    const settled = (): boolean => this.reviewable || this.stopped()
    if (settled() || this.reflectors.length === 0) return
    const deadline = Date.now() + (this.options.currentWaitMs ?? defaultCurrentWaitMs)
    while (!settled() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
  }

  reserve(record: ServiceCIDRRecord): void {
    this.state.reserve(record, this.now() + (this.options.reservationMs ?? 10_000))
  }

  release(record: ServiceCIDRRecord): void {
    this.state.release(record)
  }

  get relists(): number {
    return this.reflectors.reduce((sum, reflector) => sum + Math.max(0, reflector.lists - 1), 0)
  }
}
