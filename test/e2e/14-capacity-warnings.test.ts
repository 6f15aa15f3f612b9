// config/capacity-warnings: the optional second webhook that warns whoever creates a Service, or
// updates one so that it takes a new address, when the cluster's free Service addresses run low.
// The file registers that webhook as the Component defines it (its webhook_patch.yaml, with the
// clientConfig of the registered ServiceCIDR webhook, so it reaches the same replicas) and a policy
// that warns below 1,000,000 free IPv4 addresses, so that every Service taking an IPv4 address is
// warned about. Then, with kube-apiserver's own allocation and matchConditions:
// - a ClusterIP Service CREATE carries the warning;
// - a headless Service CREATE is not sent to the webhook at all;
// - an UPDATE from ExternalName to ClusterIP (which allocates an address) carries the warning;
// - UPDATEs that take no new address (a port, ClusterIP to ExternalName) are not sent.
// "Not sent" is read from the replicas' review counters, which nothing else moves meanwhile (the
// files run one at a time).
//
// Services: e2e-capacity-* in the default namespace (one real ClusterIP Service, one ExternalName;
// the rest are dry runs).

import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { load } from 'js-yaml'
import type { V1Service, V1ServicePort, V1ServiceSpec } from '@kubernetes/client-node'
import { serviceNamespace, specLabel } from './lib/kube.ts'
import { repoRoot } from './lib/paths.ts'
import { policyWith } from './lib/policy.ts'
import { counter, parseSamples } from './lib/prom.ts'
import { begin, finish } from './lib/setup.ts'
import { poll } from './lib/wait.ts'

const context = await begin(t, import.meta.url, 'capacity-warnings')
const { cluster, harness, file, spec } = context
const configurationName = 'servicecidr-guard-e2e-capacity'
const threshold = 1_000_000
const warned = new RegExp(`^299 - "servicecidr-guard: only \\d+ of \\d+ IPv4 Service addresses are free in this cluster \\(the policy warns below ${String(threshold)}\\)`)

/** The capacity webhook as config/capacity-warnings adds it, reaching the replicas the registered ServiceCIDR webhook reaches. */
async function capacityConfiguration(): Promise<Record<string, unknown>> {
  const [patch] = load(readFileSync(join(repoRoot, 'config/capacity-warnings/webhook_patch.yaml'), 'utf8')) as { value: Record<string, unknown> }[]
  if (patch === undefined) throw new Error('config/capacity-warnings/webhook_patch.yaml holds no patch')
  const registered = await cluster.webhookConfiguration() as { webhooks?: { clientConfig: unknown }[] } | undefined
  const clientConfig = registered?.webhooks?.[0]?.clientConfig
  if (clientConfig === undefined) throw new Error('the ServiceCIDR webhook is not registered: no clientConfig to reach the replicas with')
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingWebhookConfiguration',
    metadata: { name: configurationName, labels: { [specLabel]: spec } },
    webhooks: [{ ...patch.value, clientConfig }],
  }
}

/** Reviews the replicas have answered, every kind and outcome. */
async function reviews(): Promise<number> {
  return counter((await harness.webhookMetrics()).flatMap(parseSamples), 'servicecidr_guard_reviews_total')
}

function service(name: string, spec: V1ServiceSpec): V1Service {
  return { metadata: { name, namespace: serviceNamespace, labels: { [specLabel]: context.spec } }, spec }
}

const clusterIP = (name: string): V1Service => service(name, { type: 'ClusterIP', ports: [{ port: 80, protocol: 'TCP' }] })
const externalName = (name: string): V1Service => service(name, { type: 'ExternalName', externalName: 'web.example.com' })

async function dryRunCreate(body: V1Service): Promise<string> {
  const answer = await cluster.core.createNamespacedServiceWithHttpInfo({ namespace: serviceNamespace, body, dryRun: 'All' })
  return answer.headers['warning'] ?? ''
}

/** A dry-run replace of Service `name` with the spec `change` makes from its current one; the Warning header. */
async function dryRunUpdate(name: string, change: (current: V1ServiceSpec) => V1ServiceSpec): Promise<string> {
  const current = await cluster.core.readNamespacedService({ name, namespace: serviceNamespace })
  const body = service(name, change(current.spec ?? {}))
  if (current.metadata?.resourceVersion !== undefined && body.metadata !== undefined) body.metadata.resourceVersion = current.metadata.resourceVersion
  const answer = await cluster.core.replaceNamespacedServiceWithHttpInfo({ name, namespace: serviceNamespace, body, dryRun: 'All' })
  return answer.headers['warning'] ?? ''
}

/** A ClusterIP spec with new ports that keeps the addresses kube-apiserver allocated: it takes none. */
function withPorts(spec: V1ServiceSpec, ports: V1ServicePort[]): V1ServiceSpec {
  const { clusterIP, clusterIPs, ipFamilies, ipFamilyPolicy } = spec
  return {
    type: 'ClusterIP',
    ports,
    ...(clusterIP === undefined ? {} : { clusterIP }),
    ...(clusterIPs === undefined ? {} : { clusterIPs }),
    ...(ipFamilies === undefined ? {} : { ipFamilies }),
    ...(ipFamilyPolicy === undefined ? {} : { ipFamilyPolicy }),
  }
}

await file.spec('with the capacity webhook registered and a policy that warns, a ClusterIP Service CREATE carries the warning', async (t) => {
  // A crashed earlier run may have left it registered.
  await cluster.deleteWebhookConfiguration(configurationName)
  await cluster.createWebhookConfiguration(await capacityConfiguration())
  t.ok(await cluster.webhookConfiguration(configurationName), `registered ValidatingWebhookConfiguration ${configurationName}`)
  await harness.setPolicy(policyWith({ capacity: { warnWhenFreeBelow: { ipv4: threshold } } }))
  // kube-apiserver picks a new registration up from its informer, within a second or so.
  const warning = await poll('a dry-run Service CREATE to carry the capacity warning', async () => {
    const header = await dryRunCreate(clusterIP('e2e-capacity-probe'))
    return warned.test(header) ? header : undefined
  }, { timeoutMs: 30_000, intervalMs: 500 })
  t.comment(`Warning: ${warning}`)
  // The header quotes the warning, so its own quotes come escaped.
  t.match(warning, /add a ServiceCIDR before Services fail with \\"range is full\\""$/, 'and says what to do')
})

await file.spec('a headless Service CREATE is not sent to the webhook (matchConditions)', async (t) => {
  const before = await reviews()
  const warning = await dryRunCreate(service('e2e-capacity-headless', { clusterIP: 'None', ports: [{ port: 80, protocol: 'TCP' }] }))
  t.equal(warning, '', 'no warning')
  t.equal(await reviews(), before, 'no review answered by the replicas')
})

await file.spec('an UPDATE from ExternalName to ClusterIP takes an address, and carries the warning', async (t) => {
  await cluster.core.createNamespacedService({ namespace: serviceNamespace, body: externalName('e2e-capacity-external') })
  const before = await reviews()
  const warning = await dryRunUpdate('e2e-capacity-external', () => ({ type: 'ClusterIP', ports: [{ port: 80, protocol: 'TCP' }] }))
  t.comment(`Warning: ${warning}`)
  t.match(warning, warned, 'warned')
  t.equal(await reviews(), before + 1, 'one review answered by the replicas')
})

await file.spec('UPDATEs that take no new address are not sent to the webhook: a port changed, ClusterIP to ExternalName', async (t) => {
  // A real ClusterIP Service (one address of the default range); its CREATE is warned about.
  const created = await cluster.core.createNamespacedServiceWithHttpInfo({ namespace: serviceNamespace, body: clusterIP('e2e-capacity-web') })
  t.match(created.headers['warning'] ?? '', warned, `its CREATE was warned about (ClusterIP ${created.data.spec?.clusterIP ?? '?'})`)
  const before = await reviews()
  const portChanged = await dryRunUpdate('e2e-capacity-web', (current) => withPorts(current, [{ port: 8080, protocol: 'TCP' }]))
  t.equal(portChanged, '', 'a port changed: no warning')
  const toExternalName = await dryRunUpdate('e2e-capacity-web', () => ({ type: 'ExternalName', externalName: 'web.example.com' }))
  t.equal(toExternalName, '', 'ClusterIP to ExternalName: no warning')
  t.equal(await reviews(), before, 'no review answered by the replicas')
})

await file.spec('the capacity webhook is unregistered', async (t) => {
  await cluster.deleteWebhookConfiguration(configurationName)
  t.equal(await cluster.webhookConfiguration(configurationName), undefined, `ValidatingWebhookConfiguration ${configurationName} is gone`)
})

await finish(context)
