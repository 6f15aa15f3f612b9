// What the server tests share: a kubeconfig whose apiserver never answers (the cache keeps retrying
// in the background, so only reviews that need no cluster state can pass) and serve()'s options.

import { KubeConfig } from '@kubernetes/client-node'
import { pino } from 'pino'
import type { ServeOptions } from '../../src/server/serve.ts'

export function unreachableKubeConfig(): KubeConfig {
  const kubeConfig = new KubeConfig()
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'none', server: 'https://127.0.0.1:9', skipTLSVerify: true }],
    users: [{ name: 'none' }],
    contexts: [{ name: 'none', cluster: 'none', user: 'none' }],
    currentContext: 'none',
  })
  return kubeConfig
}

/** serve() on loopback, any free ports, silent, polling files every 50 ms. */
export function serveOptions(options: Pick<ServeOptions, 'policyPath' | 'certPath' | 'keyPath'> & Partial<ServeOptions>): ServeOptions {
  return {
    host: '127.0.0.1',
    port: 0,
    healthPort: 0,
    kubeConfig: unreachableKubeConfig(),
    logger: pino({ level: 'silent' }),
    reloadIntervalMs: 50,
    shutdownDelayMs: 0,
    shutdownTimeoutMs: 5000,
    reservationMs: 10_000,
    sharedReservation: undefined,
    staleAfterMs: 30_000,
    ...options,
  }
}
