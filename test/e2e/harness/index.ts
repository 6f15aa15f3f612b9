// Picks the harness for E2E_TARGET (local, kind; unset: local when .local/env exists) and adds what
// every target shares: the baseline policy, and a metrics snapshot before anything that resets a
// component's counters (a restart), so the summary adds up the whole run: the snapshots taken just
// before each reset plus what the components report at the end.

import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { outputDir, repoRoot, snapshotsDir } from '../lib/paths.ts'
import { KindHarness } from './kind.ts'
import { LocalHarness, localDir } from './local.ts'
import type { Harness, ReplicaFaults } from './types.ts'

export type { AuditEvent, Harness, ReplicaFaults, WebhookReadiness } from './types.ts'

/** The policy the specs are written against (config/policies/gke-beta.yaml unless E2E_POLICY). */
export const baselinePolicyPath = process.env['E2E_POLICY'] ?? join(repoRoot, 'config/policies/gke-beta.yaml')

export function baselinePolicy(): string {
  return readFileSync(baselinePolicyPath, 'utf8')
}

export interface E2EHarness extends Harness {
  /** kube-apiserver's Prometheus text (GET /metrics with the kubeconfig's client). */
  apiserverMetrics(): Promise<string>
  /**
   * Takes the webhook's ValidatingWebhookConfiguration away, saving it to a file first, so that only
   * what kube-apiserver does itself decides. restoreWebhook() puts it back; every spec file's
   * prepare step does, so a crash in between never leaves the next file without the webhook.
   */
  unregisterWebhook(): Promise<void>
  /** Registers the saved ValidatingWebhookConfiguration again; nothing to do if none is saved. */
  restoreWebhook(): Promise<void>
  /** Puts the baseline policy back in force (nothing to do when it already is). */
  resetPolicy(): Promise<void>
}

/** Where unregisterWebhook() keeps the registration it took away. */
const unregisteredWebhookPath = join(outputDir, 'unregistered-webhook.json')

function save(kind: string, reason: string, texts: readonly string[]): void {
  mkdirSync(snapshotsDir, { recursive: true })
  texts.forEach((text, index) => {
    writeFileSync(join(snapshotsDir, `${kind}-${String(Date.now())}-${String(process.pid)}-${String(index)}-${reason}.prom`), text)
  })
}

/** Delegates to the target's harness, snapshotting metrics before each reset of a component. */
class SharedActions implements E2EHarness {
  private readonly inner: Harness

  constructor(inner: Harness) {
    this.inner = inner
  }

  get name(): Harness['name'] {
    return this.inner.name
  }

  get kubeconfigPath(): string {
    return this.inner.kubeconfigPath
  }

  get kubectl(): string {
    return this.inner.kubectl
  }

  get cluster(): Harness['cluster'] {
    return this.inner.cluster
  }

  async restartApiserver(): Promise<void> {
    save('apiserver', 'before-apiserver-restart', [await this.apiserverMetrics()])
    await this.inner.restartApiserver()
  }

  async stopWebhook(): Promise<void> {
    save('webhook', 'before-webhook-stop', await this.inner.webhookMetrics())
    await this.inner.stopWebhook()
  }

  startWebhook(): Promise<void> {
    return this.inner.startWebhook()
  }

  async setPolicy(yaml: string): Promise<void> {
    // The kind harness restarts the webhook Pods to change the policy, which resets their metrics.
    if (this.inner.name === 'kind') save('webhook', 'before-policy-rollout', await this.inner.webhookMetrics())
    await this.inner.setPolicy(yaml)
  }

  resetPolicy(): Promise<void> {
    return this.setPolicy(baselinePolicy())
  }

  webhookReadiness(): ReturnType<Harness['webhookReadiness']> {
    return this.inner.webhookReadiness()
  }

  webhookMetrics(): Promise<string[]> {
    return this.inner.webhookMetrics()
  }

  sharedReservation(): Promise<boolean> {
    return this.inner.sharedReservation()
  }

  apiserverAuditEvents(name: string): ReturnType<Harness['apiserverAuditEvents']> {
    return this.inner.apiserverAuditEvents(name)
  }

  apiserverMetrics(): Promise<string> {
    return this.inner.cluster.metrics()
  }

  async unregisterWebhook(): Promise<void> {
    const registered = await this.cluster.webhookConfiguration()
    if (registered === undefined) throw new Error('the webhook is not registered: nothing to unregister')
    // What the API server fills in is dropped, so that the saved object can be created again.
    const metadata = { ...(registered['metadata'] as Record<string, unknown>) }
    for (const field of ['resourceVersion', 'uid', 'creationTimestamp', 'generation', 'managedFields']) Reflect.deleteProperty(metadata, field)
    mkdirSync(outputDir, { recursive: true })
    writeFileSync(unregisteredWebhookPath, `${JSON.stringify({ ...registered, metadata }, null, 2)}\n`)
    await this.cluster.deleteWebhookConfiguration()
  }

  async restoreWebhook(): Promise<void> {
    if (!existsSync(unregisteredWebhookPath)) return
    const saved = JSON.parse(readFileSync(unregisteredWebhookPath, 'utf8')) as Record<string, unknown>
    if (await this.cluster.webhookConfiguration() === undefined) await this.cluster.createWebhookConfiguration(saved)
    rmSync(unregisteredWebhookPath)
  }

  /** The target's Pod faults, each after a snapshot of the counters it resets. */
  get replicas(): ReplicaFaults | undefined {
    const inner = this.inner.replicas
    if (inner === undefined) return undefined
    return {
      podNames: () => inner.podNames(),
      podMetrics: (name) => inner.podMetrics(name),
      deletePod: async (name) => {
        save('webhook', 'before-pod-delete', [await inner.podMetrics(name)])
        await inner.deletePod(name)
      },
      rollout: async () => {
        save('webhook', 'before-rollout', await this.inner.webhookMetrics())
        await inner.rollout()
      },
      kubeProxyMetrics: () => inner.kubeProxyMetrics(),
      probeConnections: () => inner.probeConnections(),
    }
  }

  describe(): Record<string, string> {
    return this.inner.describe()
  }
}

export function target(): 'local' | 'kind' {
  const chosen = process.env['E2E_TARGET']
  if (chosen === 'local' || chosen === 'kind') return chosen
  if (chosen !== undefined && chosen !== '') throw new Error(`E2E_TARGET must be local or kind, not "${chosen}"`)
  if (existsSync(join(localDir(repoRoot), 'env'))) return 'local'
  throw new Error(`no cluster to test: ${join(localDir(repoRoot), 'env')} does not exist (run hack/local/up.sh, or hack/local/e2e.sh), and E2E_TARGET is not set (kind: hack/kind/e2e.sh)`)
}

let opened: E2EHarness | undefined

export function openHarness(): E2EHarness {
  opened ??= new SharedActions(target() === 'kind' ? new KindHarness() : new LocalHarness(repoRoot))
  return opened
}
