// Faults of a cluster that runs the webhook as users do (kind: config/overlays/kind, two replicas
// behind a Service, a PodDisruptionBudget), each under steady review load (lib/load.ts):
// (a) kube-apiserver restarts;
// (b) one replica's Pod is deleted (its full grace period, as `kubectl delete pod` does it);
// (c) a rolling update, caused by a policy change, and another one changing it back.
// Each must end with 0 failed reviews of requests the policy admits, every new connection to the
// webhook Service answered, reviews admitted while the fault was under way (apiserver restart:
// after it), and nothing left Terminating: a ServiceCIDR deleted just before the fault is
// finalized, and no Pod of the webhook or of kube-system is still being deleted.
//
// kube-apiserver keeps its connections to the webhook open, so the review load opens few new
// ones, and a replica that exits before kube-proxy stops routing new connections to it fails a
// review only now and then (CI: 1 of 904 during a rolling update, "context deadline exceeded").
// The connection probe (harness/kind.ts) opens one every 50 ms: with the Pod's preStop sleep and
// shutdown delay removed from the manifests, this file failed in (b) (1 refused) and (c) (2
// refused, 4 unanswered) with 0 failed reviews; see docs/deploy.md, "Shutdown". Each fault also
// prints how fast kube-proxy followed its endpoint changes
// (kubeproxy_network_programming_duration_seconds), the time the preStop sleep must cover.
//
// These faults need the webhook as Pods of a Deployment: on the local control plane (replicas are
// processes behind a round robin) the file records requirement "kind-faults" as not applied; hack/kind/e2e.sh requires it (E2E_REQUIRE=kind-faults).
//
// Ranges: 34.118.236.0/24 (the load's dry runs, never stored), 34.118.237.0/24, 34.118.238.0/24,
// 34.118.239.0/24 (one real ServiceCIDR per fault).

import t, { type Test } from 'tap'
import type { ConnectionCounts, ReplicaFaults } from './harness/types.ts'
import type { Cluster } from './lib/kube.ts'
import { ReviewLoad, type LoadReport } from './lib/load.ts'
import { histogram, parseSamples, since, slowestWithin, type Histogram } from './lib/prom.ts'
import { policyWith } from './lib/policy.ts'
import { begin, finish } from './lib/setup.ts'
import { poll } from './lib/wait.ts'

const context = await begin(t, import.meta.url, 'kind-faults')
const { cluster, harness, file, spec } = context
const requirement = 'kind-faults'
const loadCIDR = '34.118.236.0/24'
/** How long the load runs before and after each fault, so both windows hold reviews. */
const settleMs = 3_000

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** What each fault's load counted, for the requirement record that the summary carries. */
const counts: string[] = []

/** Objects being deleted that should be gone by now: ServiceCIDRs, Pods of the webhook and of kube-system. */
async function terminating(clusterClient: Cluster): Promise<string[]> {
  const left: string[] = []
  for (const item of (await clusterClient.net.listServiceCIDR()).items) {
    if (item.metadata?.deletionTimestamp !== undefined) left.push(`ServiceCIDR ${item.metadata.name ?? ''}`)
  }
  for (const namespace of ['servicecidr-guard-system', 'kube-system']) {
    for (const pod of (await clusterClient.core.listNamespacedPod({ namespace })).items) {
      if (pod.metadata?.deletionTimestamp !== undefined) left.push(`Pod ${namespace}/${pod.metadata.name ?? ''}`)
    }
  }
  return left
}

/**
 * The restarts of kube-system's containers, with when and why the last one ended: printed with a
 * failed review, whose cause may be a controller or scheduler still restarting after a fault.
 */
async function controlPlaneRestarts(clusterClient: Cluster): Promise<string> {
  const pods = (await clusterClient.core.listNamespacedPod({ namespace: 'kube-system' })).items
  return pods.flatMap((pod) => (pod.status?.containerStatuses ?? []).map((status) => {
    const ended = status.lastState?.terminated
    const last = ended === undefined ? '' : ` (last ended ${ended.finishedAt?.toISOString() ?? '?'}: ${ended.reason ?? '?'})`
    return `${status.name} ${String(status.restartCount)}${last}`
  })).join(', ')
}

/**
 * kube-proxy's kubeproxy_network_programming_duration_seconds (time from a Pod's change to the
 * Service rules that follow it), or undefined where it cannot be read: a diagnosis, not a check.
 */
async function programming(replicas: ReplicaFaults): Promise<Histogram | undefined> {
  try {
    return histogram(parseSamples(await replicas.kubeProxyMetrics()), 'kubeproxy_network_programming_duration_seconds')
  } catch {
    return undefined
  }
}

/**
 * How fast kube-proxy followed the endpoint changes of a fault. A terminating Pod must keep
 * answering until then (config/manager/manager.yaml, preStop): a connection sent to a Pod that has
 * exited gets no answer, and kube-apiserver fails the review at its timeout.
 */
function programmingLine(before: Histogram | undefined, after: Histogram | undefined): string {
  if (before === undefined || after === undefined) return 'kube-proxy\'s programming latency could not be read'
  const during = since(after, before)
  const slowest = slowestWithin(during)
  if (slowest === undefined) return 'kube-proxy wrote no endpoint change'
  return `kube-proxy wrote the rules for ${String(during.count)} endpoint changes, the slowest ${slowest === Infinity ? 'over' : 'within'} ${String(slowest === Infinity ? during.buckets.at(-2)?.le : slowest)} s of its change`
}

/**
 * Creates a ServiceCIDR in `cidr`, starts the load, deletes the ServiceCIDR (an admitted DELETE),
 * runs `fault`, and checks the outcome: no failed review, reviews admitted while the fault ran (or,
 * with `admittedDuring: false`, after it), the ServiceCIDR finalized, nothing left Terminating.
 */
async function underLoad(t: Test, replicas: ReplicaFaults, name: string, cidr: string, fault: () => Promise<void>, admittedDuring = true): Promise<LoadReport> {
  await cluster.createServiceCIDR({ name, cidrs: [cidr], spec })
  await cluster.waitServiceCIDRReady(name)
  const stopProbe = await replicas.probeConnections()
  const load = new ReviewLoad(cluster, { cidr: loadCIDR, namePrefix: `e2e-${name}-load` })
  load.start()
  let report: LoadReport
  let connections: ConnectionCounts
  let started = Date.now()
  try {
    await sleep(settleMs)
    await cluster.net.deleteServiceCIDR({ name })
    load.enter('during')
    started = Date.now()
    const programmedBefore = await programming(replicas)
    await fault()
    t.comment(`${name}: fault from ${new Date(started).toISOString()}, done in ${((Date.now() - started) / 1000).toFixed(1)} s`)
    load.enter('after')
    await sleep(settleMs)
    t.comment(`${name}: ${programmingLine(programmedBefore, await programming(replicas))}`)
  } finally {
    report = await load.stop()
    connections = await stopProbe()
  }
  const { windows, total, failures } = report
  // When each failed connection was tried, from the fault's start: the fault's own window, or before or after it.
  const when = connections.failures.map(({ kind, at }) => `${kind} at ${Number.isNaN(at) ? '?' : `${at >= started ? '+' : ''}${((at - started) / 1000).toFixed(1)} s`}`)
  const probed = `${String(connections.accepted)} accepted, ${String(connections.refused)} refused, ${String(connections.unanswered)} unanswered${when.length > 0 ? ` (${when.slice(0, 20).join(', ')}${when.length > 20 ? ', …' : ''}, from the fault's start)` : ''}`
  const line = `${name}: ${String(total.sent)} reviews sent, ${String(total.admitted)} admitted, ${String(total.failedReviews)} failed, ${String(total.apiserverUnavailable)} not answered by kube-apiserver (before/during/after: ${(['before', 'during', 'after'] as const).map((w) => `${String(windows[w].admitted)}/${String(windows[w].sent)}`).join(', ')} admitted/sent); new connections to the Service: ${probed}`
  counts.push(line)
  t.comment(line)
  if (total.failedReviews > 0) t.comment(`restarts in kube-system: ${await controlPlaneRestarts(cluster)}`)
  t.equal(total.failedReviews, 0, `0 failed reviews of admitted requests${failures.length > 0 ? `: ${failures.join('; ')}` : ''}`)
  t.equal(connections.refused + connections.unanswered, 0, `every new connection to the Service was answered: ${probed}`)
  t.ok(windows.before.admitted > 0, `reviews admitted before the fault (${String(windows.before.admitted)})`)
  if (admittedDuring) t.ok(windows.during.admitted > 0, `reviews admitted while the fault was under way (${String(windows.during.admitted)})`)
  t.ok(windows.after.admitted > 0, `reviews admitted after the fault (${String(windows.after.admitted)})`)
  await cluster.waitServiceCIDRGone(name)
  t.pass(`ServiceCIDR ${name}, deleted just before the fault, was finalized`)
  const left = await poll('nothing left Terminating', async () => {
    const now = await terminating(cluster)
    return now.length === 0 ? now : undefined
  }, { timeoutMs: 60_000, intervalMs: 500 }).catch(async () => terminating(cluster))
  t.same(left, [], 'nothing left Terminating')
  return report
}

const replicas = harness.replicas
if (replicas === undefined) {
  const reason = `the ${harness.name} target runs the webhook replicas as processes, not Pods of a Deployment: no Pod to delete, no rollout`
  for (const name of ['(a) kube-apiserver restarts under load', '(b) one replica\'s Pod deleted under load', '(c) a rolling update by a policy change under load']) {
    await file.skip(name, requirement, reason)
  }
} else {
  await file.spec('(a) kube-apiserver restarts under load', async (t) => {
    await underLoad(t, replicas, 'e2e-kind-faults-a', '34.118.237.0/24', () => harness.restartApiserver(), false)
  })

  await file.spec('(b) one replica\'s Pod deleted under load', async (t) => {
    const pods = await replicas.podNames()
    t.ok(pods.length >= 2, `the webhook runs ${String(pods.length)} replicas`)
    const [victim] = pods
    if (victim === undefined) throw new Error('no webhook Pod to delete')
    await underLoad(t, replicas, 'e2e-kind-faults-b', '34.118.238.0/24', () => replicas.deletePod(victim))
    t.notOk((await replicas.podNames()).includes(victim), `Pod ${victim} was replaced`)
  })

  await file.spec('(c) a rolling update by a policy change under load', async (t) => {
    await underLoad(t, replicas, 'e2e-kind-faults-c', '34.118.239.0/24', async () => {
      await harness.setPolicy(policyWith({ overlap: 'AllowExpansion' }))
      const readiness = await harness.webhookReadiness()
      t.ok(readiness.length >= 2 && readiness.every((entry) => entry.status === 200), `${String(readiness.length)} new Pods ready with the changed policy`)
      await harness.resetPolicy()
    })
  })

  file.requirement(requirement, true, counts.join('; '))
}

await finish(context)
