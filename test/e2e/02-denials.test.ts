// What the webhook refuses, as a person running kubectl sees it through kube-apiserver: HTTP 403,
// the apiserver's "admission webhook ... denied the request:" prefix, and a message that says what to
// do next.
//
// Ranges: 34.118.224.0/24 (an existing range to overlap and to fill), 34.118.225.0/29 and
// 34.118.224.0/19 (refused for their size), 10.100.0.0/24 (refused: outside the block), and the free
// range the webhook suggests (created and deleted again).

import t from 'tap'
import { assertDenied } from './lib/assert.ts'
import { parseIPv4CIDR, overlapping } from './lib/ipv4.ts'
import { failure, serviceNamespace } from './lib/kube.ts'
import { begin, finish } from './lib/setup.ts'

const context = await begin(t, import.meta.url, 'denials')
const { cluster, file, spec } = context
const existing = { name: 'e2e-denials-a', cidr: '34.118.224.0/24' }
const allowedBlock = parseIPv4CIDR('34.118.224.0/20')!
const services = [
  { name: 'e2e-denials-svc-1', ip: '34.118.224.10' },
  { name: 'e2e-denials-svc-2', ip: '34.118.224.11' },
]

await file.spec(`setup: ServiceCIDR ${existing.name} (${existing.cidr}) admitted and Ready`, async (t) => {
  await cluster.createServiceCIDR({ name: existing.name, cidrs: [existing.cidr], spec })
  await cluster.waitServiceCIDRReady(existing.name)
  t.pass(`${existing.name} is Ready`)
})

await file.spec('a range outside the allowed block is denied; the message names the block and a free range that fits', async (t) => {
  const failed = await failure(() => cluster.createServiceCIDR({ name: 'e2e-denials-outside', cidrs: ['10.100.0.0/24'], spec }))
  const message = assertDenied(t, failed, {
    includes: ['ServiceCIDR "e2e-denials-outside" is not allowed by the servicecidr-guard policy', 'spec.cidrs[0] 10.100.0.0/24 is outside the allowed IPv4 ranges (34.118.224.0/20)'],
    rule: 'AllowedRanges',
  })
  const suggested = /(\d+\.\d+\.\d+\.\d+\/\d+) is free and the policy admits it/.exec(message)?.[1]
  t.ok(suggested, `a free range is suggested: ${suggested ?? 'none'}`)
  if (suggested === undefined) return
  const range = parseIPv4CIDR(suggested)!
  t.equal(range.bits, 24, 'the suggestion has the requested size (/24)')
  t.ok(range.network >= allowedBlock.network && range.network + range.size <= allowedBlock.network + allowedBlock.size, `${suggested} is inside 34.118.224.0/20`)
  const taken = (await cluster.net.listServiceCIDR()).items.flatMap((item) => item.spec?.cidrs ?? []).flatMap((cidr) => parseIPv4CIDR(cidr) ?? [])
  t.notOk(taken.some((cidr) => overlapping(cidr, range)), `${suggested} overlaps no existing ServiceCIDR`)
  // The suggestion is only worth something if following it works.
  const created = await cluster.createServiceCIDR({ name: 'e2e-denials-suggested', cidrs: [suggested], spec })
  t.same(created.spec?.cidrs, [suggested], 'creating the suggested range is admitted')
  await cluster.deleteServiceCIDR('e2e-denials-suggested')
})

await file.spec('a range overlapping an existing ServiceCIDR is denied, naming it', async (t) => {
  const failed = await failure(() => cluster.createServiceCIDR({ name: 'e2e-denials-overlap', cidrs: ['34.118.224.128/25'], spec }))
  assertDenied(t, failed, {
    includes: [`spec.cidrs[0] 34.118.224.128/25 overlaps ServiceCIDR "${existing.name}" (${existing.cidr})`],
    rule: 'Overlap',
  })
  t.equal(await cluster.getServiceCIDR('e2e-denials-overlap'), undefined, 'nothing was created')
})

await file.spec('prefixes outside the policy\'s bounds (/20../28) are denied', async (t) => {
  const tooSmall = await failure(() => cluster.createServiceCIDR({ name: 'e2e-denials-tiny', cidrs: ['34.118.225.0/29'], spec }))
  assertDenied(t, tooSmall, {
    includes: ['spec.cidrs[0] 34.118.225.0/29 is too small: the policy allows IPv4 prefixes from /20 to /28'],
    rule: 'PrefixLength',
  })
  const tooLarge = await failure(() => cluster.createServiceCIDR({ name: 'e2e-denials-huge', cidrs: ['34.118.224.0/19'], spec }))
  assertDenied(t, tooLarge, {
    includes: ['spec.cidrs[0] 34.118.224.0/19 is too large: the policy allows IPv4 prefixes from /20 to /28', 'is outside the allowed IPv4 ranges (34.118.224.0/20)'],
    rule: 'PrefixLength',
  })
})

await file.spec('deleting a ServiceCIDR whose addresses Services hold is denied, naming the Services', async (t) => {
  for (const { name, ip } of services) {
    const created = await cluster.createService(spec, name, { clusterIP: ip })
    t.equal(created.spec?.clusterIP, ip, `Service ${name} holds ${ip}`)
  }
  await cluster.waitDeleteRefusedAsInUse(existing.name)
  const failed = await failure(() => cluster.net.deleteServiceCIDR({ name: existing.name }))
  assertDenied(t, failed, {
    includes: [
      `Deleting ServiceCIDR "${existing.name}" is not allowed by the servicecidr-guard policy`,
      `ServiceCIDR "${existing.name}" still has 2 allocated addresses that no other ServiceCIDR covers`,
      ...services.map(({ name, ip }) => `Service ${serviceNamespace}/${name} (${ip})`),
    ],
    rule: 'InUse',
  })
  const still = await cluster.getServiceCIDR(existing.name)
  t.ok(still, 'the ServiceCIDR is still there')
  t.equal(still?.metadata?.deletionTimestamp, undefined, 'and not Terminating')
})

await file.spec('once the Services are deleted, the delete is admitted and the finalizer controller removes the object', async (t) => {
  for (const { name } of services) await cluster.deleteService(name)
  await cluster.deleteServiceCIDR(existing.name)
  t.equal(await cluster.getServiceCIDR(existing.name), undefined, `${existing.name} is gone`)
})

await finish(context)
