// Assembles the running webhook from its options: policy, cluster cache, certificate, metrics, the
// two listeners, and an orderly shutdown. Every dependency is built here and passed down.

import type { KubeConfig } from '@kubernetes/client-node'
import type { FastifyInstance } from 'fastify'
import type { Server as HTTPSServer } from 'node:https'
import { hostname } from 'node:os'
import type { Logger } from 'pino'
import { createReviewer } from '../admission/reviewer.ts'
import { ClusterCache } from '../cluster/cache.ts'
import { KubeLeaseStore } from '../cluster/lease.ts'
import { SharedReservations } from '../cluster/reservations.ts'
import { PolicySource } from '../config/policy-source.ts'
import { buildHealthApp, buildWebhookApp, type DecisionLog, type Readiness } from './app.ts'
import { CertificateSource, secureContextOptions } from './certificate.ts'
import { collectStartupGarbage } from './heap.ts'
import { Metrics } from './metrics.ts'

export interface ServeOptions {
  readonly policyPath: string
  readonly certPath: string
  readonly keyPath: string
  readonly host: string
  readonly port: number
  /** Plain-HTTP port for probes and metrics; 0 picks a free port, undefined disables it. */
  readonly healthPort: number | undefined
  readonly kubeConfig: KubeConfig
  readonly logger: Logger
  /** Writes each decision's line (src/cli/logger.ts); default: `logger.info(line, 'review')`. */
  readonly decisions?: DecisionLog | undefined
  readonly reloadIntervalMs: number
  /** After SIGTERM: keep serving (not ready) this long, so endpoints drop the pod first. */
  readonly shutdownDelayMs: number
  /** After the delay: how long in-flight reviews may take to finish. */
  readonly shutdownTimeoutMs: number
  /** How long an admitted range counts for overlap checks if the watch does not show it first. */
  readonly reservationMs: number
  /** The Lease where every replica records what it admits; undefined: each replica on its own. */
  readonly sharedReservation: { readonly namespace: string, readonly name: string, readonly deadlineMs: number } | undefined
  /** How long the view may go without an open watch before the replica is not ready. */
  readonly staleAfterMs: number
}

/** The margin the reservation TTL keeps past the slowest validating webhook's timeoutSeconds (docs/deploy.md). */
const reservationMarginMs = 5000

/**
 * How long the view may go without an open watch before reviews stop trusting it: at most the
 * margin a reservation keeps past the webhook timeouts. A reservation (this replica's, or one in the
 * shared Lease) lasts the TTL: the slowest webhook's timeoutSeconds for kube-apiserver to store the
 * object, then the margin for every replica's watch to show it. A replica whose watch has been down
 * for longer than the margin may lack an object whose reservation has already expired, and would
 * admit a range overlapping it. Such a review first wakes the watch and waits for it briefly
 * (ClusterCache.current); readiness keeps the longer staleAfterMs, so that a short gap does not take
 * the replica out of the Service.
 */
export function reviewStaleAfterMs(reservationMs: number, staleAfterMs: number): number {
  return Math.max(0, Math.min(staleAfterMs, reservationMarginMs, reservationMs - reservationMarginMs))
}

export interface RunningServer {
  /** Resolves once the webhook listens with a certificate (it may still be syncing). */
  readonly listening: Promise<void>
  webhookAddress(): { host: string, port: number } | undefined
  healthAddress(): { host: string, port: number } | undefined
  readiness(): Readiness
  readonly cache: ClusterCache
  shutdown(reason: string): Promise<void>
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

function addressOf(app: FastifyInstance | undefined): { host: string, port: number } | undefined {
  const address = app?.server.address()
  return address !== null && typeof address === 'object' ? { host: address.address, port: address.port } : undefined
}

export async function serve(options: ServeOptions): Promise<RunningServer> {
  const { logger } = options
  let shuttingDown = false
  let listening = false

  let reservations: SharedReservations | undefined
  const cache = new ClusterCache({
    kubeConfig: options.kubeConfig,
    log: logger.child({ component: 'cache' }),
    reservationMs: options.reservationMs,
    staleAfterMs: options.staleAfterMs,
    reviewStaleAfterMs: reviewStaleAfterMs(options.reservationMs, options.staleAfterMs),
    onServiceCIDR: (record) => reservations?.observe(record),
    // Before the replica is ready, so that reviews do not start while the start-up is still being
    // marked (src/server/heap.ts). It only makes reviews cheaper: should it throw, the cache logs
    // it and the replica serves.
    onFirstSync: () => {
      const collected = collectStartupGarbage()
      logger.info({ ms: Math.round(collected.ms), heapUsedMiB: Math.round(collected.heapUsedAfter / 1048576) }, 'cache synced; start-up garbage collected before the replica is ready')
    },
  })
  const metrics = new Metrics({ state: cache.state, synced: () => cache.synced, relists: () => cache.relists, sweepReservations: () => reservations?.sweep() })

  const shared = options.sharedReservation
  const leaseStore = shared && new KubeLeaseStore(options.kubeConfig, shared.namespace, shared.name)
  if (shared !== undefined && leaseStore !== undefined) {
    reservations = new SharedReservations({
      store: leaseStore,
      replica: `${hostname()}/${String(process.pid)}`,
      ttlMs: options.reservationMs,
      deadlineMs: shared.deadlineMs,
      log: logger.child({ component: 'reservations' }),
      events: metrics.reservationEvents(),
    })
    void reservations.probe().then((error) => {
      if (error === undefined) logger.info({ lease: leaseStore.where, ttlMs: options.reservationMs, deadlineMs: shared.deadlineMs }, 'shared reservations: the Lease is readable')
      else logger.warn({ lease: leaseStore.where, error }, 'shared reservations: the Lease cannot be read; admitted CREATEs fail closed until it can')
    })
  } else {
    logger.warn('shared reservations off (--no-shared-reservation): with more than one replica, two overlapping ServiceCIDRs created at the same moment can both be admitted')
  }

  const policySource = await PolicySource.open(options.policyPath, options.reloadIntervalMs, {
    onLoad: (policy, first) => {
      metrics.policyValid.set(1)
      if (!first) metrics.policyReloads.inc()
      logger.info({ policy: options.policyPath, enforcement: policy.enforcement, overlap: policy.overlap, allowedRanges: policy.allowedRanges?.map((range) => range.text) ?? 'any' }, first ? 'policy loaded' : 'policy reloaded')
    },
    onError: (message) => {
      metrics.policyValid.set(0)
      metrics.policyReloadErrors.inc()
      logger.error({ policy: options.policyPath, error: message }, 'changed policy refused; the last good policy stays in force')
    },
    onRestored: () => {
      metrics.policyValid.set(1)
      logger.info({ policy: options.policyPath }, 'the policy file is again the policy in force')
    },
  })

  void cache.start()

  const readiness = (): Readiness => {
    const pair = certificate.current
    const policy = policySource.health
    const checks = {
      shuttingDown,
      certificate: pair === undefined ? { loaded: false } : { loaded: true, subject: pair.subject, notAfter: pair.notAfter.toISOString(), reloads: certificate.reloads },
      webhook: { listening },
      cache: {
        state: cache.syncState,
        apiVersion: cache.version,
        servicecidrs: cache.state.serviceCIDRCount,
        ipaddresses: cache.state.ipAddressCount,
        relists: cache.relists,
        ...(cache.lastError === undefined ? {} : { lastError: cache.lastError }),
      },
      reservations: reservations === undefined
        ? { shared: false }
        : { shared: true, lease: reservations.where, ...(reservations.lastError === undefined ? {} : { lastError: reservations.lastError }) },
      policy: { source: policy.source, loadedAt: new Date(policy.loadedAt).toISOString(), valid: policy.lastError === undefined, ...(policy.lastError === undefined ? {} : { lastError: policy.lastError }) },
    }
    return { ready: !shuttingDown && listening && pair !== undefined && cache.synced, checks }
  }
  const health = { readiness }

  const reviewer = createReviewer({ policy: () => policySource.policy, cluster: cache, reservations })
  let webhookApp: FastifyInstance | undefined
  let resolveListening: () => void = () => undefined
  let rejectListening: (error: unknown) => void = () => undefined
  const listeningPromise = new Promise<void>((resolve, reject) => {
    resolveListening = resolve
    rejectListening = reject
  })

  const certificate = new CertificateSource(options.certPath, options.keyPath, options.reloadIntervalMs, {
    onLoad: (pair, first) => {
      metrics.certificateExpiry.set(pair.notAfter.getTime() / 1000)
      if (first) {
        logger.info({ subject: pair.subject, notAfter: pair.notAfter }, 'serving certificate loaded')
        // A first pair read as serve stops (a poll in flight) must not start a server nothing closes.
        if (shuttingDown) return
        webhookApp = buildWebhookApp({ logger, decisions: options.decisions, metrics, health, reviewer, https: secureContextOptions(pair), draining: () => shuttingDown })
        webhookApp.listen({ host: options.host, port: options.port }).then(() => {
          listening = true
          logger.info({ address: addressOf(webhookApp) }, 'webhook listening')
          resolveListening()
        }, rejectListening)
        return
      }
      metrics.certificateReloads.inc()
      // New handshakes use the new pair; connections already open keep theirs, so none fails.
      ;(webhookApp?.server as HTTPSServer | undefined)?.setSecureContext(secureContextOptions(pair))
      logger.info({ subject: pair.subject, notAfter: pair.notAfter }, 'serving certificate reloaded')
    },
    onError: (message) => {
      metrics.certificateErrors.inc()
      logger.warn({ error: message }, certificate.current === undefined ? 'waiting for the serving certificate' : 'new serving certificate not usable; keeping the current one')
    },
  })

  /** Stops what runs besides the two servers: the file polls, the Lease client, the watches. */
  const stopSources = async (): Promise<void> => {
    certificate.stop()
    policySource.stop()
    leaseStore?.close()
    await cache.stop()
  }

  let healthApp: FastifyInstance | undefined
  if (options.healthPort !== undefined) {
    healthApp = buildHealthApp({ logger, metrics, health })
    try {
      await healthApp.listen({ host: options.host, port: options.healthPort })
    } catch (error) {
      // Refused, serve must leave nothing running: a webhook serving without its probes' port
      // would keep the process up after its caller has reported the error.
      shuttingDown = true
      await webhookApp?.close()
      await stopSources()
      throw error
    }
  }

  const shutdown = async (reason: string): Promise<void> => {
    if (shuttingDown) return
    shuttingDown = true
    logger.info({ reason, delayMs: options.shutdownDelayMs }, 'shutting down: no longer ready, draining')
    await sleep(options.shutdownDelayMs)
    const closing = webhookApp?.close() ?? Promise.resolve()
    // The deadline's timer is cleared once the reviews are done: left running, it would keep the
    // process alive for the whole shutdown timeout after everything else has stopped.
    let deadline: NodeJS.Timeout | undefined
    const timedOut = await Promise.race([
      closing.then(() => false),
      new Promise<boolean>((resolve) => {
        deadline = setTimeout(() => { resolve(true) }, options.shutdownTimeoutMs)
      }),
    ])
    clearTimeout(deadline)
    if (timedOut) {
      logger.warn({ timeoutMs: options.shutdownTimeoutMs }, 'in-flight reviews did not finish in time; closing their connections')
      // Once the server is closing, Node no longer checks the headers and request timeouts
      // (Server#close stops connectionsCheckingInterval), so a request still arriving, however
      // slowly, would otherwise keep the process running past the shutdown timeout.
      webhookApp?.server.closeAllConnections()
    }
    await stopSources()
    await healthApp?.close()
    logger.info('stopped')
  }

  return {
    listening: listeningPromise,
    webhookAddress: () => addressOf(webhookApp),
    healthAddress: () => addressOf(healthApp),
    readiness,
    cache,
    shutdown,
  }
}
