// What every spec file does first and last: find the cluster, wait for it and the webhook to be
// ready, put the baseline policy in force, and remove what an earlier run may have left; at the end
// remove what it created and restore the policy.

import type { Test } from 'tap'
import { openHarness, type E2EHarness } from '../harness/index.ts'
import type { Cluster } from './kube.ts'
import { SpecFile } from './report.ts'
import { poll } from './wait.ts'

export interface SpecContext {
  readonly harness: E2EHarness
  readonly cluster: Cluster
  readonly file: SpecFile
  /** The value of the e2e label on every object this file creates. */
  readonly spec: string
}

export async function waitWebhookReady(harness: E2EHarness, timeoutMs = 60_000): Promise<void> {
  await poll('the webhook to be ready (/readyz 200, cache Synced)', async () => {
    const all = await harness.webhookReadiness()
    return all.length > 0 && all.every((entry) => entry.status === 200 && entry.body.checks?.cache?.state === 'Synced')
  }, { timeoutMs })
}

export async function begin(t: Test, moduleURL: string, spec: string): Promise<SpecContext> {
  const file = new SpecFile(t, moduleURL)
  const harness = openHarness()
  const context = { harness, cluster: harness.cluster, file, spec }
  await file.spec('prepare: cluster and webhook ready, baseline policy, no left-overs', async (t) => {
    await harness.cluster.waitApiserverReady()
    // A spec file that unregistered the webhook and crashed before it registered it again.
    await harness.restoreWebhook()
    await harness.cluster.removeAdmissionPolicies()
    await waitWebhookReady(harness)
    await harness.resetPolicy()
    // Every spec's left-overs, not only this file's: the files run one at a time (test/e2e/run.ts),
    // and a run stopped mid-file on a cluster that outlives it (KEEP_CLUSTER=1 on kind) leaves its
    // Services and ServiceCIDRs there. One left-over ServiceCIDR gave 01-gke-walkthrough's "one
    // Service too many" an address, so "range is full" never came.
    await harness.cluster.cleanup()
    t.pass(`${harness.name} cluster ready: ${JSON.stringify(harness.describe())}`)
  })
  return context
}

export async function finish({ harness, cluster, file, spec }: SpecContext): Promise<void> {
  await file.spec('clean up: what this file created is gone, baseline policy in force', async (t) => {
    await cluster.cleanup(spec)
    await harness.resetPolicy()
    const left = await cluster.net.listServiceCIDR({ labelSelector: `e2e.servicecidr-guard.dev/spec=${spec}` })
    t.equal(left.items.length, 0, 'no ServiceCIDR of this file is left')
  })
}
