// Faults, through the harness (local: processes restarted with hack/local/ctl.sh; kind: the apiserver
// container and the webhook Deployment):
// (a) kube-apiserver restarts under a running webhook: the webhook's cache recovers and its decisions
//     stay right for objects created after the restart.
// (b) the webhook is down: ServiceCIDR writes fail closed, yet kube-apiserver restarts to ready, and a
//     deletion admitted just before still completes (the finalizer removal is a metadata-only UPDATE
//     that matchConditions keep away from the webhook). The ServiceCIDR also carries a finalizer of
//     the suite's own (holdFinalizer), removed only once the webhook is down: kube-controller-manager
//     removes its finalizer 10 s after the delete, and stopping the webhook on a busy kind node has
//     taken 14 s, so without it the deletion could complete before the webhook is down and prove
//     nothing.
//
// Ranges: 34.118.228.0/24 (a) and 34.118.229.0/24 (b); 34.118.230.0/24 is only ever refused.

import t from 'tap'
import { assertDenied } from './lib/assert.ts'
import { failure, finalizer, holdFinalizer, serviceNamespace } from './lib/kube.ts'
import { begin, finish, waitWebhookReady } from './lib/setup.ts'
import { poll } from './lib/wait.ts'

const context = await begin(t, import.meta.url, 'faults')
const { cluster, harness, file, spec } = context
const a = { name: 'e2e-faults-a', cidr: '34.118.228.0/24', service: 'e2e-faults-a-svc', ip: '34.118.228.10' }
const b = { name: 'e2e-faults-b', cidr: '34.118.229.0/24' }

await file.spec('(a) after kube-apiserver restarts, the webhook\'s cache recovers', async (t) => {
  const started = Date.now()
  await harness.restartApiserver()
  t.comment(`kube-apiserver restarted and ready in ${((Date.now() - started) / 1000).toFixed(1)} s`)
  const readiness = await poll('the webhook /readyz 200 with cache Synced', async () => {
    const all = await harness.webhookReadiness()
    return all.length > 0 && all.every((entry) => entry.status === 200 && entry.body.checks?.cache?.state === 'Synced') ? all : undefined
  }, { timeoutMs: 60_000 })
  for (const entry of readiness) {
    t.equal(entry.status, 200, '/readyz 200')
    t.equal(entry.body.checks?.cache?.state, 'Synced', 'checks.cache.state Synced')
  }
})

await file.spec('(a) decisions after the restart use what the cache saw after it', async (t) => {
  await cluster.createServiceCIDR({ name: a.name, cidrs: [a.cidr], spec })
  await cluster.waitServiceCIDRReady(a.name)
  const service = await cluster.createService(spec, a.service, { clusterIP: a.ip })
  t.equal(service.spec?.clusterIP, a.ip, `Service ${a.service} holds ${a.ip}`)
  await cluster.waitDeleteRefusedAsInUse(a.name)
  const inUse = await failure(() => cluster.net.deleteServiceCIDR({ name: a.name }))
  assertDenied(t, inUse, { includes: [`Service ${serviceNamespace}/${a.service} (${a.ip})`], rule: 'InUse' })
  const overlap = await failure(() => cluster.createServiceCIDR({ name: 'e2e-faults-a-overlap', cidrs: ['34.118.228.0/25'], spec }))
  const message = assertDenied(t, overlap, { includes: [`overlaps ServiceCIDR "${a.name}" (${a.cidr})`], rule: 'Overlap' })
  // A range the webhook admitted itself is also remembered as "admitted moments ago" until the watch
  // shows it; this one must come from the watch.
  t.notOk(message.includes('admitted moments ago'), 'the overlap was found in the watched state, not only in the webhook\'s own reservation')
})

let terminatingWhenWebhookGone = false

await file.spec('(b) with the webhook stopped, ServiceCIDR creates fail closed', async (t) => {
  await cluster.createServiceCIDR({ name: b.name, cidrs: [b.cidr], spec })
  await cluster.waitServiceCIDRReady(b.name)
  await cluster.setHold(b.name, true)
  await cluster.net.deleteServiceCIDR({ name: b.name })
  t.pass(`deleting ${b.name} (unused, held by ${holdFinalizer}) was admitted`)
  const started = Date.now()
  await harness.stopWebhook()
  const stopped = (Date.now() - started) / 1000
  const terminating = await cluster.getServiceCIDR(b.name)
  terminatingWhenWebhookGone = terminating?.metadata?.deletionTimestamp !== undefined
  t.ok(terminatingWhenWebhookGone, `${b.name} was still Terminating when the webhook was gone (${stopped.toFixed(1)} s after the delete)`)
  t.comment(terminating?.metadata?.finalizers?.includes(finalizer) === true
    ? `kube-controller-manager's finalizer was still on ${b.name} too: its removal is also made with the webhook down`
    : `kube-controller-manager had removed its finalizer before the webhook was gone (it does 10 s after the delete); ${holdFinalizer} is the one removed with the webhook down`)

  const refused = await failure(() => cluster.createServiceCIDR({ name: 'e2e-faults-closed', cidrs: ['34.118.230.0/24'], spec }))
  t.match(refused.status.message, /failed calling webhook "validate\.servicecidr-guard\.dev"/, `refused: ${refused.status.message ?? ''}`)
  t.ok(refused.code >= 500, `HTTP ${String(refused.code)}`)
  t.equal(await cluster.getServiceCIDR('e2e-faults-closed'), undefined, 'nothing was created')
})

await file.spec('(b) with the webhook stopped, kube-apiserver restarts to ready', async (t) => {
  const started = Date.now()
  await harness.restartApiserver()
  t.pass(`kube-apiserver ready again in ${((Date.now() - started) / 1000).toFixed(1)} s`)
  const kubernetes = await cluster.getServiceCIDR('kubernetes')
  t.ok(kubernetes, 'the default ServiceCIDR "kubernetes" is there')
})

await file.spec('(b) the deletion admitted before the webhook stopped completes without it', async (t) => {
  await cluster.setHold(b.name, false)
  t.pass(`removing ${holdFinalizer} (a metadata-only UPDATE) was admitted with the webhook down`)
  await cluster.waitServiceCIDRGone(b.name)
  t.ok(terminatingWhenWebhookGone, `${b.name} is gone: its finalizers were removed while the webhook was down`)
})

await file.spec('(b) the webhook comes back and judges again', async (t) => {
  await harness.startWebhook()
  await waitWebhookReady(harness)
  const refused = await failure(() => cluster.createServiceCIDR({ name: 'e2e-faults-back', cidrs: ['10.100.0.0/24'], spec }))
  assertDenied(t, refused, { includes: ['is outside the allowed IPv4 ranges (34.118.224.0/20)'], rule: 'AllowedRanges' })
})

await finish(context)
