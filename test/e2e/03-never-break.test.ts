// What the webhook must never break: the apiserver's own default ServiceCIDR, kube-controller-manager's
// finalizer patches and metadata-only updates, the documented expansion of a range (when the policy
// allows it), and dry-run requests, which must be judged the same and reserve nothing.
//
// Ranges: 34.118.226.0/24 (finalizer, labels), 34.118.227.0/24 (dry run), 34.118.232.0/22 inside
// 34.118.232.0/21 (expansion), 34.118.236.0/24 and 34.118.224.0/20 (refused overlaps).

import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node'
import t from 'tap'
import { assertDenied } from './lib/assert.ts'
import { failure, finalizer, readyCondition, serviceCIDRObject } from './lib/kube.ts'
import { policyWith } from './lib/policy.ts'
import { begin, finish } from './lib/setup.ts'
import { poll } from './lib/wait.ts'

const context = await begin(t, import.meta.url, 'never-break')
const { cluster, harness, file, spec } = context

await file.spec('the apiserver\'s own "kubernetes" ServiceCIDR is present, Ready and finalized', async (t) => {
  const kubernetes = await cluster.getServiceCIDR('kubernetes')
  t.ok(kubernetes, 'ServiceCIDR "kubernetes" exists')
  t.ok((kubernetes?.spec?.cidrs ?? []).length > 0, `it holds the service range: ${kubernetes?.spec?.cidrs?.join(', ') ?? 'none'}`)
  t.equal(kubernetes === undefined ? undefined : readyCondition(kubernetes)?.status, 'True', 'Ready=True')
  t.ok(kubernetes?.metadata?.finalizers?.includes(finalizer), `it carries ${finalizer}`)
})

await file.spec('kube-controller-manager\'s finalizer patch and a metadata-only update go through', async (t) => {
  const name = 'e2e-never-break-meta'
  await cluster.createServiceCIDR({ name, cidrs: ['34.118.226.0/24'], spec })
  const withFinalizer = await poll(`${finalizer} on ${name}`, async () => {
    const object = await cluster.getServiceCIDR(name)
    return object?.metadata?.finalizers?.includes(finalizer) ? object : undefined
  })
  t.ok(withFinalizer.metadata?.finalizers?.includes(finalizer), 'the controller added its finalizer (an UPDATE through admission)')
  const patched = await cluster.net.patchServiceCIDR(
    { name, body: { metadata: { labels: { 'e2e.servicecidr-guard.dev/touched': 'yes' } } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  )
  t.equal(patched.metadata?.labels?.['e2e.servicecidr-guard.dev/touched'], 'yes', 'adding a label (merge patch) is admitted')
  const current = await cluster.net.readServiceCIDR({ name })
  current.metadata ??= {}
  current.metadata.annotations = { ...current.metadata.annotations, 'e2e.servicecidr-guard.dev/note': 'replaced' }
  const replaced = await cluster.net.replaceServiceCIDR({ name, body: current })
  t.equal(replaced.metadata?.annotations?.['e2e.servicecidr-guard.dev/note'], 'replaced', 'a full replace (PUT) that changes only metadata is admitted')
  await cluster.deleteServiceCIDR(name)
})

await file.spec('with overlap: AllowExpansion, a covering range is admitted; identical or contained ones are not', async (t) => {
  await harness.setPolicy(policyWith({ overlap: 'AllowExpansion' }))
  t.comment('policy in force: overlap AllowExpansion')
  await cluster.createServiceCIDR({ name: 'e2e-never-break-small', cidrs: ['34.118.232.0/22'], spec })
  await cluster.waitServiceCIDRReady('e2e-never-break-small')
  const service = await cluster.createService(spec, 'e2e-never-break-expansion', { clusterIP: '34.118.232.10' })
  t.equal(service.spec?.clusterIP, '34.118.232.10', 'a Service holds an address of the /22')

  const cover = await cluster.createServiceCIDR({ name: 'e2e-never-break-cover', cidrs: ['34.118.232.0/21'], spec })
  t.same(cover.spec?.cidrs, ['34.118.232.0/21'], 'the covering /21 is admitted')
  await cluster.waitServiceCIDRReady('e2e-never-break-cover')

  const identical = await failure(() => cluster.createServiceCIDR({ name: 'e2e-never-break-same', cidrs: ['34.118.232.0/21'], spec }))
  assertDenied(t, identical, {
    includes: ['spec.cidrs[0] 34.118.232.0/21 overlaps ServiceCIDR "e2e-never-break-cover" (34.118.232.0/21)', '(a new range may only strictly contain existing ones)'],
    rule: 'Overlap',
  })
  const contained = await failure(() => cluster.createServiceCIDR({ name: 'e2e-never-break-inner', cidrs: ['34.118.236.0/24'], spec }))
  assertDenied(t, contained, {
    includes: ['spec.cidrs[0] 34.118.236.0/24 overlaps ServiceCIDR "e2e-never-break-cover" (34.118.232.0/21)'],
    rule: 'Overlap',
  })

  // The point of expanding: the small range can go although a Service holds one of its addresses,
  // because the /21 covers it (canDeleteCIDR), and the Service keeps its address.
  await cluster.deleteServiceCIDR('e2e-never-break-small')
  t.equal(await cluster.getServiceCIDR('e2e-never-break-small'), undefined, 'the /22 was deleted and finalized while its address is covered by the /21')
  const kept = await cluster.core.readNamespacedService({ name: 'e2e-never-break-expansion', namespace: 'default' })
  t.equal(kept.spec?.clusterIP, '34.118.232.10', 'the Service kept its address')
})

await file.spec('after the baseline policy (overlap: Deny) is restored, a covering range is denied again', async (t) => {
  await harness.resetPolicy()
  const covering = await failure(() => cluster.createServiceCIDR({ name: 'e2e-never-break-wider', cidrs: ['34.118.224.0/20'], spec }))
  assertDenied(t, covering, { includes: ['spec.cidrs[0] 34.118.224.0/20 overlaps ServiceCIDR', '"e2e-never-break-cover" (34.118.232.0/21)'], rule: 'Overlap' })
  await cluster.deleteService('e2e-never-break-expansion')
  await cluster.deleteServiceCIDR('e2e-never-break-cover')
})

await file.spec('dry run: an invalid request is denied with the same message; a valid one creates and reserves nothing', async (t) => {
  const invalid = { name: 'e2e-never-break-dry-bad', cidrs: ['10.100.0.0/24'], spec }
  const dry = await failure(() => cluster.net.createServiceCIDR({ body: serviceCIDRObject(invalid), dryRun: 'All' }))
  const wet = await failure(() => cluster.createServiceCIDR(invalid))
  const message = assertDenied(t, dry, { includes: ['spec.cidrs[0] 10.100.0.0/24 is outside the allowed IPv4 ranges (34.118.224.0/20)'], rule: 'AllowedRanges' })
  t.equal(message, wet.status.message, 'the dry run is denied with exactly the message of the real request')

  const probe = { name: 'e2e-never-break-dry-probe', cidrs: ['34.118.227.0/24'], spec }
  const answer = await cluster.net.createServiceCIDRWithHttpInfo({ body: serviceCIDRObject(probe), dryRun: 'All' })
  t.equal(answer.httpStatusCode, 201, 'the valid dry run is allowed (201)')
  t.equal(await cluster.getServiceCIDR(probe.name), undefined, 'and nothing was created')
  // Another name, the same range: an admitted non-dry-run CREATE would be reserved for overlap checks.
  const real = await cluster.createServiceCIDR({ name: 'e2e-never-break-dry-real', cidrs: ['34.118.227.0/24'], spec })
  t.same(real.spec?.cidrs, ['34.118.227.0/24'], 'a real create of the same range right after is admitted: the dry run reserved nothing')
  await cluster.deleteServiceCIDR('e2e-never-break-dry-real')
})

await finish(context)
