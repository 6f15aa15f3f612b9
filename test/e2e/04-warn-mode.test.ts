// enforcement: Warn lets a request that breaks the policy through, and tells the client why in an
// admission warning (the HTTP "Warning" header, which kubectl prints as "Warning: ...").
//
// Ranges: 10.200.0.0/24 (outside the block, admitted only while the policy warns).

import t from 'tap'
import { failure, serviceCIDRObject } from './lib/kube.ts'
import { policyWith } from './lib/policy.ts'
import { counter, parseSamples } from './lib/prom.ts'
import { begin, finish } from './lib/setup.ts'

const context = await begin(t, import.meta.url, 'warn-mode')
const { cluster, harness, file, spec } = context
const outside = { name: 'e2e-warn-mode-outside', cidrs: ['10.200.0.0/24'], spec }

async function warnedReviews(): Promise<number> {
  return counter((await harness.webhookMetrics()).flatMap(parseSamples), 'servicecidr_guard_reviews_total', { outcome: 'warned' })
}

await file.spec('under the baseline policy (Deny) the out-of-range create is refused', async (t) => {
  const failed = await failure(() => cluster.createServiceCIDR(outside))
  t.equal(failed.code, 403, 'HTTP 403 under enforcement: Deny')
})

await file.spec('with enforcement: Warn the create succeeds and the client sees the admission warning', async (t) => {
  await harness.setPolicy(policyWith({ enforcement: 'Warn' }))
  t.comment('policy in force: enforcement Warn')
  const warnedBefore = await warnedReviews()
  const answer = await cluster.net.createServiceCIDRWithHttpInfo({ body: serviceCIDRObject(outside) })
  t.equal(answer.httpStatusCode, 201, 'created (201)')
  t.same(answer.data.spec?.cidrs, outside.cidrs, 'as asked')
  const warning = answer.headers['warning'] ?? ''
  t.comment(`Warning: ${warning}`)
  t.match(warning, /^299 - "servicecidr-guard \(Warn\): /, 'the warning header carries a 299 admission warning from servicecidr-guard')
  t.ok(warning.includes('spec.cidrs[0] 10.200.0.0/24 is outside the allowed IPv4 ranges (34.118.224.0/20)'), 'and says what breaks the policy')
  t.ok(await cluster.getServiceCIDR(outside.name), 'the ServiceCIDR exists')
  t.equal(await warnedReviews(), warnedBefore + 1, 'the webhook counted one more warned review')
})

await file.spec('back under Deny, a second out-of-range create is refused again; the warned one can be deleted', async (t) => {
  await harness.resetPolicy()
  const failed = await failure(() => cluster.createServiceCIDR({ ...outside, name: 'e2e-warn-mode-again', cidrs: ['10.200.1.0/24'] }))
  t.equal(failed.code, 403, 'HTTP 403 once enforcement is Deny again')
  await cluster.deleteServiceCIDR(outside.name)
  t.equal(await cluster.getServiceCIDR(outside.name), undefined, 'the range admitted under Warn is deleted (it holds no address)')
})

await finish(context)
