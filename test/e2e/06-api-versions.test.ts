// Both API versions of ServiceCIDR reach the webhook and get the same verdicts: networking.k8s.io/v1
// always, v1beta1 where the cluster serves it (1.31-1.36 with the beta API enabled; removed in 1.37).
// Where v1beta1 is not served the spec is recorded as not applied; E2E_REQUIRE=v1beta1 turns that
// into a failure, for the CI job that runs on a version with the beta API.
//
// Ranges: 34.118.230.0/24 (v1beta1), 34.118.231.0/24 (v1); 10.100.0.0/24 is only ever refused.

import type { V1Status } from '@kubernetes/client-node'
import t from 'tap'
import { assertDenied } from './lib/assert.ts'
import { failure, serviceCIDRObject } from './lib/kube.ts'
import { begin, finish } from './lib/setup.ts'

const context = await begin(t, import.meta.url, 'api-versions')
const { cluster, file, spec } = context
const outsideMessage = 'spec.cidrs[0] 10.100.0.0/24 is outside the allowed IPv4 ranges (34.118.224.0/20)'
let served: string[] = []

// Inside a spec: tap ends a file's root test as soon as it has no subtest to wait for, so nothing
// that does I/O may run between specs at the top level.
await file.spec('discovery: which networking.k8s.io versions the cluster serves', async (t) => {
  served = await cluster.networkingVersions()
  t.ok(served.length > 0, `served by ${await cluster.serverVersion()}: ${served.join(', ')}`)
})

await file.spec('v1: a create outside the allowed block is denied; an allowed one passes', async (t) => {
  t.ok(served.includes('v1'), 'networking.k8s.io/v1 is served')
  const failed = await failure(() => cluster.createServiceCIDR({ name: 'e2e-api-versions-v1-outside', cidrs: ['10.100.0.0/24'], spec }))
  assertDenied(t, failed, { includes: [outsideMessage], rule: 'AllowedRanges' })
  const created = await cluster.createServiceCIDR({ name: 'e2e-api-versions-v1', cidrs: ['34.118.231.0/24'], spec })
  t.equal(created.apiVersion, 'networking.k8s.io/v1', 'answered in v1')
  t.same(created.spec?.cidrs, ['34.118.231.0/24'], 'the allowed v1 create passes')
  await cluster.deleteServiceCIDR('e2e-api-versions-v1')
})

const beta = '/apis/networking.k8s.io/v1beta1/servicecidrs'
if (served.includes('v1beta1')) {
  file.requirement('v1beta1', true, 'networking.k8s.io/v1beta1 is served')
  await file.spec('v1beta1: a create outside the allowed block is denied with the same message; an allowed one passes', async (t) => {
    const outside = await cluster.rawJSON('POST', beta, { body: serviceCIDRObject({ name: 'e2e-api-versions-beta-outside', cidrs: ['10.100.0.0/24'], spec }, 'networking.k8s.io/v1beta1') })
    assertDenied(t, { code: outside.status, status: outside.body as V1Status, headers: {} }, { includes: [outsideMessage], rule: 'AllowedRanges' })
    const v1 = await failure(() => cluster.createServiceCIDR({ name: 'e2e-api-versions-beta-outside', cidrs: ['10.100.0.0/24'], spec }))
    t.equal((outside.body as V1Status).message, v1.status.message, 'exactly the message the same request gets in v1')

    const name = 'e2e-api-versions-beta'
    const created = await cluster.rawJSON('POST', beta, { body: serviceCIDRObject({ name, cidrs: ['34.118.230.0/24'], spec }, 'networking.k8s.io/v1beta1') })
    t.equal(created.status, 201, 'the allowed v1beta1 create passes (201)')
    t.equal((created.body as { apiVersion?: string }).apiVersion, 'networking.k8s.io/v1beta1', 'answered in v1beta1')
    t.same((await cluster.getServiceCIDR(name))?.spec?.cidrs, ['34.118.230.0/24'], 'the same object is visible in v1')
    const overlap = await cluster.rawJSON('POST', beta, { body: serviceCIDRObject({ name: 'e2e-api-versions-beta-overlap', cidrs: ['34.118.230.0/25'], spec }, 'networking.k8s.io/v1beta1') })
    assertDenied(t, { code: overlap.status, status: overlap.body as V1Status, headers: {} }, { includes: [`overlaps ServiceCIDR "${name}" (34.118.230.0/24)`], rule: 'Overlap' })
    const deleted = await cluster.raw('DELETE', `${beta}/${name}`)
    t.equal(deleted.status, 200, 'deleting it through v1beta1 is admitted (it is unused)')
    await cluster.waitServiceCIDRGone(name)
  })
} else {
  await file.skip('v1beta1: the same verdicts for networking.k8s.io/v1beta1', 'v1beta1', `this cluster does not serve networking.k8s.io/v1beta1 (served: ${served.join(', ') || 'none'}); KUBE_VERSION=v1.34.4 hack/local/e2e.sh covers it`)
}

await finish(context)
