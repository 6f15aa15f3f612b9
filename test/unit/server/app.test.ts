// Contract tests of the HTTP edge with fastify.inject: the exact AdmissionReview JSON sent back.

import t from 'tap'
import { pino } from 'pino'
import { createReviewer, type ClusterPort, type ReservationPort } from '../../../src/admission/reviewer.ts'
import { maxReviewBytes } from '../../../src/admission/review.ts'
import { formatReservations, SharedReservations } from '../../../src/cluster/reservations.ts'
import { parsePolicy } from '../../../src/config/policy.ts'
import { ClusterState, toServiceCIDRRecord } from '../../../src/policy/state.ts'
import type { Policy } from '../../../src/policy/types.ts'
import { buildWebhookApp, type DecisionLine, type Readiness } from '../../../src/server/app.ts'
import { Metrics } from '../../../src/server/metrics.ts'
import { MemoryLeaseStore } from '../../support/lease-store.ts'

const gke = parsePolicy(`
apiVersion: servicecidr-guard/v1alpha1
kind: Policy
spec:
  allowedRanges: [34.118.224.0/20]
  prefixLength: {ipv4: {min: 20, max: 28}}
`, 'test')

const silent = pino({ level: 'silent' })

interface Harness {
  state: ClusterState
  app: ReturnType<typeof buildWebhookApp>
  metrics: Metrics
  setReady(ready: boolean): void
}

function harness(policy: Policy = gke, options: { synced?: boolean, reviewer?: () => never, reservations?: ReservationPort, draining?: () => boolean, decisions?: (line: DecisionLine) => void, logger?: pino.Logger } = {}): Harness {
  const state = new ClusterState()
  state.upsertServiceCIDR(toServiceCIDRRecord({ metadata: { name: 'kubernetes' }, spec: { cidrs: ['10.96.0.0/28'] } })!)
  const cluster: ClusterPort = {
    view: () => (options.synced ?? true ? state : undefined),
    current: () => Promise.resolve(),
    reserve: (record) => { state.reserve(record, Number.MAX_SAFE_INTEGER) },
    release: (record) => { state.release(record) },
  }
  let ready = true
  const metrics = new Metrics({ state, synced: () => true, relists: () => 0 }, { defaultMetrics: false })
  const health = { readiness: (): Readiness => ({ ready, checks: { cache: { state: ready ? 'Synced' : 'Syncing' } } }) }
  const reviewer = options.reviewer ?? createReviewer({ policy: () => policy, cluster, reservations: options.reservations })
  const app = buildWebhookApp({ logger: options.logger ?? silent, metrics, health, reviewer, ...(options.draining ? { draining: options.draining } : {}), ...(options.decisions ? { decisions: options.decisions } : {}) })
  return { state, app, metrics, setReady: (value) => { ready = value } }
}

function review(operation: string, name: string, cidrs: string[] | undefined, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const object = cidrs === undefined ? null : { apiVersion: 'networking.k8s.io/v1', kind: 'ServiceCIDR', metadata: { name }, spec: { cidrs } }
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: `uid-${name}`,
      kind: { group: 'networking.k8s.io', version: 'v1', kind: 'ServiceCIDR' },
      resource: { group: 'networking.k8s.io', version: 'v1', resource: 'servicecidrs' },
      name,
      operation,
      userInfo: { username: 'alice', groups: ['system:authenticated'] },
      object: operation === 'DELETE' ? null : object,
      oldObject: operation === 'DELETE' ? object : null,
      dryRun: false,
      ...extra,
    },
  }
}

t.test('an admitted CREATE answers allowed with the uid', async (t) => {
  const { app } = harness()
  const response = await app.inject({ method: 'POST', url: '/validate', payload: review('CREATE', 'extra', ['34.118.224.0/24']) })
  t.equal(response.statusCode, 200)
  t.match(response.headers['content-type'], /^application\/json/)
  t.same(response.json(), { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: 'uid-extra', allowed: true } })
})

t.test('every decision is logged once, through the decisions writer when given, else as logger.info(line, \'review\')', async (t) => {
  const lines: DecisionLine[] = []
  const { app } = harness(gke, { decisions: (line) => { lines.push(line) } })
  await app.inject({ method: 'POST', url: '/validate', payload: review('CREATE', 'extra', ['34.118.224.0/24']) })
  await app.inject({ method: 'POST', url: '/validate', payload: review('CREATE', 'outside', ['10.0.0.0/24']) })
  t.match(lines, [
    { uid: 'uid-extra', user: 'alice', operation: 'CREATE', resource: 'ServiceCIDR', name: 'extra', cidrs: ['34.118.224.0/24'], verdict: 'allowed', rules: [], dryRun: false, durationMs: Number },
    { uid: 'uid-outside', name: 'outside', cidrs: ['10.0.0.0/24'], verdict: 'denied', reason: /is outside the allowed IPv4 ranges \(34.118.224.0\/20\)/, rules: ['AllowedRanges'] },
  ])
  t.equal(lines.length, 2)
  await app.inject({ method: 'POST', url: '/validate', headers: { 'content-type': 'application/json' }, payload: '{"request":' })
  t.equal(lines.length, 2, 'a request refused as malformed is logged at warn by the logger, not as a decision')

  const written: string[] = []
  const logger = pino({ level: 'info' }, { write: (text: string) => { written.push(text) } })
  const plain = harness(gke, { logger })
  await plain.app.inject({ method: 'POST', url: '/validate', payload: review('CREATE', 'extra', ['34.118.224.0/24']) })
  t.match(written.map((text) => JSON.parse(text) as unknown), [{ level: 30, msg: 'review', uid: 'uid-extra', verdict: 'allowed' }])
})

t.test('once shutdown begins, every answer closes its connection; before, connections are kept alive', async (t) => {
  let draining = false
  const { app } = harness(gke, { draining: () => draining })
  const before = await app.inject({ method: 'POST', url: '/validate', payload: review('CREATE', 'before', ['34.118.224.0/24']) })
  t.not(before.headers['connection'], 'close', 'kept alive while serving')
  draining = true
  const during = await app.inject({ method: 'POST', url: '/validate', payload: review('CREATE', 'during', ['34.118.225.0/24']) })
  t.equal(during.headers['connection'], 'close', 'closed after the response while draining')
  t.same(during.json(), { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: 'uid-during', allowed: true } }, 'and still decided')
  const refused = await app.inject({ method: 'POST', url: '/validate', headers: { 'content-type': 'text/plain' }, payload: 'not a review' })
  t.equal(refused.statusCode, 400, 'refused before the handler: wrong content type')
  t.equal(refused.headers['connection'], 'close', 'a refusal before the handler, while draining, closes its connection too')
})

t.test('a denied CREATE is a 200 AdmissionReview with a 403 status, the causes and a suggestion', async (t) => {
  const { app } = harness()
  const response = await app.inject({ method: 'POST', url: '/validate', payload: review('CREATE', 'outside', ['10.100.0.0/24']) })
  t.equal(response.statusCode, 200)
  const message = 'ServiceCIDR "outside" is not allowed by the servicecidr-guard policy: spec.cidrs[0] 10.100.0.0/24 is outside the allowed IPv4 ranges (34.118.224.0/20). 34.118.224.0/24 is free and the policy admits it.'
  t.same(response.json(), {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    response: {
      uid: 'uid-outside',
      allowed: false,
      status: {
        code: 403,
        reason: 'Forbidden',
        message,
        details: { causes: [{ reason: 'AllowedRanges', message: 'spec.cidrs[0] 10.100.0.0/24 is outside the allowed IPv4 ranges (34.118.224.0/20)', field: 'spec.cidrs[0]' }] },
      },
      auditAnnotations: { violations: 'AllowedRanges: spec.cidrs[0] 10.100.0.0/24 is outside the allowed IPv4 ranges (34.118.224.0/20)' },
    },
  })
})

t.test('the audit annotation keeps its key once kube-apiserver prefixes it with the webhook name', async (t) => {
  const { app } = harness({ ...gke, enforcement: 'Audit' })
  const response = await app.inject({ method: 'POST', url: '/validate', payload: review('CREATE', 'outside', ['10.100.0.0/24']) })
  const { auditAnnotations } = response.json<{ response: { auditAnnotations: Record<string, string> } }>().response
  // The apiserver records `<webhook name>/<key>` and drops a key that is not then one prefix and one
  // qualified name (checkKeyFormat in k8s.io/apiserver/pkg/admission/attributes.go).
  for (const key of Object.keys(auditAnnotations)) {
    const parts = `validate.servicecidr-guard.dev/${key}`.split('/')
    t.equal(parts.length, 2, `${key}: one prefix, one name`)
    t.match(parts[1], /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/, `${key}: a qualified name`)
  }
  t.same(Object.keys(auditAnnotations), ['violations'])
})

t.test('Warn mode allows and returns admission warnings', async (t) => {
  const { app } = harness({ ...gke, enforcement: 'Warn' })
  const response = await app.inject({ method: 'POST', url: '/validate', payload: review('CREATE', 'outside', ['10.100.0.0/24']) })
  const body = response.json<{ response: { allowed: boolean, warnings: string[], status?: unknown } }>()
  t.equal(body.response.allowed, true)
  t.same(body.response.warnings, ['servicecidr-guard (Warn): spec.cidrs[0] 10.100.0.0/24 is outside the allowed IPv4 ranges (34.118.224.0/20)'])
  t.equal(body.response.status, undefined)
})

t.test('DELETE carries the object in oldObject', async (t) => {
  const { app, state } = harness()
  state.upsertServiceCIDR(toServiceCIDRRecord({ metadata: { name: 'extra' }, spec: { cidrs: ['34.118.224.0/24'] } })!)
  state.upsertIPAddress({
    name: '34.118.224.10', family: 'IPv4', value: 0x2276e00an, familyLabel: 'IPv4', managed: true,
    parentRef: { group: '', resource: 'services', namespace: 'default', name: 'web' },
  })
  const response = await app.inject({ method: 'POST', url: '/validate', payload: review('DELETE', 'extra', ['34.118.224.0/24']) })
  const body = response.json<{ response: { allowed: boolean, status: { message: string } } }>()
  t.equal(body.response.allowed, false)
  t.match(body.response.status.message, 'Service default/web (34.118.224.10)')
})

t.test('two overlapping CREATEs arriving together: only the first is admitted', async (t) => {
  const { app } = harness()
  const [first, second] = await Promise.all([
    app.inject({ method: 'POST', url: '/validate', payload: review('CREATE', 'a', ['34.118.224.0/24']) }),
    app.inject({ method: 'POST', url: '/validate', payload: review('CREATE', 'b', ['34.118.224.0/23']) }),
  ])
  t.equal(first.json<{ response: { allowed: boolean } }>().response.allowed, true)
  const denied = second.json<{ response: { allowed: boolean, status: { message: string } } }>().response
  t.equal(denied.allowed, false)
  t.match(denied.status.message, 'overlaps ServiceCIDR "a" (34.118.224.0/24, admitted moments ago)')
})

t.test('a dry-run CREATE is decided but reserves nothing', async (t) => {
  const { app } = harness()
  const dry = await app.inject({ method: 'POST', url: '/validate', payload: review('CREATE', 'a', ['34.118.224.0/24'], { dryRun: true }) })
  t.equal(dry.json<{ response: { allowed: boolean } }>().response.allowed, true)
  const real = await app.inject({ method: 'POST', url: '/validate', payload: review('CREATE', 'b', ['34.118.224.0/24']) })
  t.equal(real.json<{ response: { allowed: boolean } }>().response.allowed, true)
})

t.test('while the cache is not synced, CREATE fails closed but the apiserver default passes', async (t) => {
  const { app } = harness(gke, { synced: false })
  const create = await app.inject({ method: 'POST', url: '/validate', payload: review('CREATE', 'a', ['34.118.224.0/24']) })
  const denied = create.json<{ response: { allowed: boolean, status: { message: string } } }>().response
  t.equal(denied.allowed, false)
  t.match(denied.status.message, 'has not finished reading')
  const apiserver = await app.inject({
    method: 'POST',
    url: '/validate',
    payload: review('CREATE', 'kubernetes', ['10.96.0.0/28'], { userInfo: { username: 'system:apiserver', groups: ['system:masters'] } }),
  })
  t.same(apiserver.json(), { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: 'uid-kubernetes', allowed: true } })
})

/** The shared reservations over an in-memory Lease, as another replica would see it too. */
function shared(store: MemoryLeaseStore): SharedReservations {
  return new SharedReservations({ store, replica: 'replica-1', ttlMs: 10_000, deadlineMs: 1000, log: { warn: () => undefined } })
}

const unconfirmedMessage = 'the overlap check across the webhook\'s replicas could not be completed: kube-apiserver could not be reached: injected unavailable'

t.test('the shared reservation cannot be recorded: Deny refuses with a message that says so and to retry', async (t) => {
  const store = new MemoryLeaseStore()
  store.failWith = 'unavailable'
  const { app, state } = harness(gke, { reservations: shared(store) })
  const response = await app.inject({ method: 'POST', url: '/validate', payload: review('CREATE', 'extra', ['34.118.224.0/24']) })
  t.equal(response.statusCode, 200)
  t.same(response.json(), {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    response: {
      uid: 'uid-extra',
      allowed: false,
      status: {
        code: 403,
        reason: 'Forbidden',
        message: `ServiceCIDR "extra" was not admitted: ${unconfirmedMessage}. Nothing was created; retry in a few seconds, and if this keeps happening, ask your platform team to check the servicecidr-guard webhook.`,
        details: { causes: [{ reason: 'OverlapUnconfirmed', message: unconfirmedMessage, field: 'spec.cidrs' }] },
      },
      auditAnnotations: { violations: `OverlapUnconfirmed: ${unconfirmedMessage}` },
    },
  })
  t.same([...state.pendingServiceCIDRs()], [], 'the refused CREATE holds no reservation here')
})

t.test('the shared reservation cannot be recorded: Warn admits with a warning, Audit admits with the audit annotation', async (t) => {
  const store = new MemoryLeaseStore()
  store.failWith = 'unavailable'
  const warn = harness({ ...gke, enforcement: 'Warn' }, { reservations: shared(store) })
  const warned = await warn.app.inject({ method: 'POST', url: '/validate', payload: review('CREATE', 'extra', ['34.118.224.0/24']) })
  t.same(warned.json(), {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    response: {
      uid: 'uid-extra',
      allowed: true,
      warnings: [`servicecidr-guard (Warn): ${unconfirmedMessage}; another replica may have admitted an overlapping range at the same moment`],
      auditAnnotations: { violations: `OverlapUnconfirmed: ${unconfirmedMessage}` },
    },
  })
  const audit = harness({ ...gke, enforcement: 'Audit' }, { reservations: shared(store) })
  const audited = await audit.app.inject({ method: 'POST', url: '/validate', payload: review('CREATE', 'extra', ['34.118.224.0/24']) })
  t.same(audited.json(), {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    response: { uid: 'uid-extra', allowed: true, auditAnnotations: { violations: `OverlapUnconfirmed: ${unconfirmedMessage}` } },
  })
  const metrics = await audit.app.inject({ method: 'GET', url: '/metrics' })
  t.match(metrics.body, 'servicecidr_guard_reviews_total{operation="CREATE",outcome="audited"} 1')
})

t.test('a range another replica reserved moments ago: the CREATE is refused, naming it, with a free range', async (t) => {
  const store = new MemoryLeaseStore({ annotation: formatReservations([{ name: 'theirs', cidrs: ['34.118.224.0/24'], expiresAt: Date.now() + 10_000, replica: 'replica-2', uid: 'u' }]) })
  const { app } = harness(gke, { reservations: shared(store) })
  const response = await app.inject({ method: 'POST', url: '/validate', payload: review('CREATE', 'mine', ['34.118.224.0/25']) })
  const cause = 'spec.cidrs[0] 34.118.224.0/25 overlaps ServiceCIDR "theirs" (34.118.224.0/24, admitted moments ago)'
  t.same(response.json(), {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    response: {
      uid: 'uid-mine',
      allowed: false,
      status: {
        code: 403,
        reason: 'Forbidden',
        message: `ServiceCIDR "mine" is not allowed by the servicecidr-guard policy: ${cause}. 34.118.225.0/25 is free and the policy admits it.`,
        details: { causes: [{ reason: 'Overlap', message: cause, field: 'spec.cidrs[0]' }] },
      },
      auditAnnotations: { violations: `Overlap: ${cause}` },
    },
  })
  t.equal(store.updates, 0, 'nothing written for a refused CREATE')
  const recorded = await app.inject({ method: 'POST', url: '/validate', payload: review('CREATE', 'elsewhere', ['34.118.226.0/24']) })
  t.same(recorded.json(), { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: 'uid-elsewhere', allowed: true } }, 'a range nobody holds is admitted')
  t.equal(store.updates, 1, 'and recorded in the Lease')
})

const errorReview = (uid: string, code: number, reason: string, message: string): unknown => ({
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  response: { uid, allowed: false, status: { code, reason, message } },
})

t.test('bad input gets a 400 that is itself an AdmissionReview', async (t) => {
  const cases: { name: string, headers?: Record<string, string>, payload: string | Buffer, uid?: string, message: string }[] = [
    { name: 'empty body', headers: { 'content-type': 'application/json' }, payload: '', message: 'servicecidr-guard: the request body is empty; send an AdmissionReview as JSON [SCG_EMPTY_BODY]' },
    { name: 'wrong content type', headers: { 'content-type': 'text/plain' }, payload: '{}', message: 'servicecidr-guard: the content type must be application/json [SCG_CONTENT_TYPE]' },
    { name: 'malformed JSON', headers: { 'content-type': 'application/json' }, payload: '{"apiVersion": ', message: 'servicecidr-guard: the request body is not valid JSON' },
    { name: 'not an AdmissionReview', headers: { 'content-type': 'application/json' }, payload: '{"kind":"Pod"}', message: "servicecidr-guard: the request is not an admission.k8s.io/v1 AdmissionReview ((top level) must have required property 'apiVersion') [SCG_INVALID_REVIEW]" },
    { name: 'a __proto__ key, read as a key like any other', headers: { 'content-type': 'application/json' }, payload: '{"__proto__": {"apiVersion": "admission.k8s.io/v1"}}', message: "servicecidr-guard: the request is not an admission.k8s.io/v1 AdmissionReview ((top level) must have required property 'apiVersion') [SCG_INVALID_REVIEW]" },
    { name: 'valid JSON around a field of the wrong type', headers: { 'content-type': 'application/json' }, payload: JSON.stringify({ ...review('CREATE', 'w', ['10.0.0.0/24']), request: { ...(review('CREATE', 'w', ['10.0.0.0/24'])['request'] as object), dryRun: 'no' } }), uid: 'uid-w', message: 'servicecidr-guard: the request is not an admission.k8s.io/v1 AdmissionReview (/request/dryRun must be boolean) [SCG_INVALID_REVIEW]' },
    {
      name: 'a Pod review (misconfigured rules), uid echoed',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ ...review('CREATE', 'p', ['10.0.0.0/24']), request: { ...(review('CREATE', 'p', ['10.0.0.0/24'])['request'] as object), kind: { group: '', version: 'v1', kind: 'Pod' } } }),
      uid: 'uid-p',
      message: 'servicecidr-guard: this webhook reviews networking.k8s.io ServiceCIDRs, and core/v1 Service CREATEs and UPDATEs for capacity warnings, nothing else; check the webhook configuration rules (got core/v1 Pod) [SCG_UNSUPPORTED_RESOURCE]',
    },
    {
      name: 'a Service DELETE (the capacity webhook matching more than CREATE and UPDATE), uid echoed',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ ...review('DELETE', 's', ['10.0.0.0/24']), request: { ...(review('DELETE', 's', ['10.0.0.0/24'])['request'] as object), kind: { group: '', version: 'v1', kind: 'Service' } } }),
      uid: 'uid-s',
      message: 'servicecidr-guard: this webhook reviews networking.k8s.io ServiceCIDRs, and core/v1 Service CREATEs and UPDATEs for capacity warnings, nothing else; check the webhook configuration rules (got core/v1 Service) [SCG_UNSUPPORTED_RESOURCE]',
    },
  ]
  for (const testCase of cases) {
    const { app } = harness()
    const response = await app.inject({ method: 'POST', url: '/validate', payload: testCase.payload, ...(testCase.headers ? { headers: testCase.headers } : {}) })
    t.equal(response.statusCode, 400, testCase.name)
    const body = response.json<{ response: { uid: string, allowed: boolean, status: { code: number, reason: string, message: string } } }>()
    t.equal(body.response.uid, testCase.uid ?? '', `${testCase.name}: uid`)
    t.equal(body.response.allowed, false, `${testCase.name}: refused`)
    t.equal(body.response.status.code, 400, `${testCase.name}: status code`)
    t.equal(body.response.status.reason, 'BadRequest', `${testCase.name}: reason`)
    t.match(body.response.status.message, testCase.message, `${testCase.name}: message`)
  }
})

t.test('a body announced larger than the largest AdmissionReview is refused with 413 before it is read', async (t) => {
  const { app } = harness()
  const huge = JSON.stringify({ padding: 'x'.repeat(maxReviewBytes) })
  const response = await app.inject({ method: 'POST', url: '/validate', payload: huge, headers: { 'content-type': 'application/json' } })
  t.equal(response.statusCode, 413)
  t.equal(response.headers['connection'], 'close', 'the rest of the body is not read, so the connection is not reused')
  t.same(response.json(), errorReview('', 413, 'RequestEntityTooLarge', `servicecidr-guard: the request body is larger than 6 MiB, which no AdmissionReview of a ServiceCIDR or Service needs (content-length ${huge.length}) [SCG_BODY_TOO_LARGE]`))
})

t.test('a review of exactly the largest size is reviewed; one byte more is refused', async (t) => {
  const { app } = harness()
  const sized = (bytes: number): string => {
    const body = review('CREATE', 'big', ['34.118.224.0/24'])
    const request = body['request'] as Record<string, unknown>
    request['options'] = { padding: '' }
    const padding = bytes - JSON.stringify(body).length
    request['options'] = { padding: 'x'.repeat(padding) }
    return JSON.stringify(body)
  }
  const largest = await app.inject({ method: 'POST', url: '/validate', payload: sized(maxReviewBytes), headers: { 'content-type': 'application/json' } })
  t.equal(largest.statusCode, 200)
  t.same(largest.json(), { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: 'uid-big', allowed: true } })
  const over = await app.inject({ method: 'POST', url: '/validate', payload: sized(maxReviewBytes + 1), headers: { 'content-type': 'application/json' } })
  t.equal(over.statusCode, 413)
})

t.test('a failing reviewer answers 500 with the uid and the server keeps serving', async (t) => {
  const { app } = harness(gke, { reviewer: () => { throw new TypeError('boom') } })
  const response = await app.inject({ method: 'POST', url: '/validate', payload: review('CREATE', 'x', ['34.118.224.0/24']) })
  t.equal(response.statusCode, 500)
  t.same(response.json(), errorReview('uid-x', 500, 'InternalError', 'servicecidr-guard: servicecidr-guard failed to review the request [SCG_INTERNAL]'))
  const again = await app.inject({ method: 'GET', url: '/livez' })
  t.equal(again.statusCode, 200)
})

t.test('a client that hangs up before the end of its body is refused as a bad request, not an internal error', async (t) => {
  const written: { level: number, msg: string, reason?: string }[] = []
  const logger = pino({ level: 'info' }, { write: (text: string) => { written.push(JSON.parse(text) as typeof written[number]) } })
  const { app, metrics } = harness(gke, { logger })
  const body = JSON.stringify(review('CREATE', 'x', ['34.118.224.0/24']))
  // The body stream fails as Node's fails it when the connection closes early ("aborted").
  const response = await app.inject({ method: 'POST', url: '/validate', headers: { 'content-type': 'application/json' }, payload: body.slice(0, 20), simulate: { error: true, end: false, split: false, close: false } })
  t.equal(response.statusCode, 400)
  t.match(written, [{ level: 40, msg: 'review refused: bad request', reason: 'SCG_BAD_REQUEST' }])
  t.equal(written.length, 1, 'no error line with a stack')
  t.match((await metrics.registry.getSingleMetricAsString('servicecidr_guard_review_errors_total')), 'code="SCG_BAD_REQUEST"} 1')
})

t.test('a review refused for an internal error is logged as one, not as a bad request', async (t) => {
  const written: { level: number, msg: string, uid?: string, reason?: string }[] = []
  const logger = pino({ level: 'info' }, { write: (text: string) => { written.push(JSON.parse(text) as typeof written[number]) } })
  const { app } = harness(gke, { logger, reviewer: () => { throw new TypeError('boom') } })
  await app.inject({ method: 'POST', url: '/validate', payload: review('CREATE', 'x', ['34.118.224.0/24']) })
  t.match(written, [
    { level: 50, msg: 'review failed' },
    { level: 40, msg: 'review refused: internal error', uid: 'uid-x', reason: 'SCG_INTERNAL' },
  ])
  t.equal(written.length, 2)
})

t.test('unknown paths answer 404 as an AdmissionReview', async (t) => {
  const { app } = harness()
  const response = await app.inject({ method: 'GET', url: '/validate' })
  t.equal(response.statusCode, 404)
  t.same(response.json(), errorReview('', 404, 'NotFound', 'servicecidr-guard: no such endpoint; AdmissionReviews go to POST /validate [SCG_NOT_FOUND]'))
})

t.test('health and metrics', async (t) => {
  const { app, setReady } = harness()
  t.same((await app.inject({ method: 'GET', url: '/livez' })).json(), { status: 'ok' })
  const ready = await app.inject({ method: 'GET', url: '/readyz' })
  t.equal(ready.statusCode, 200)
  setReady(false)
  const unready = await app.inject({ method: 'GET', url: '/readyz' })
  t.equal(unready.statusCode, 503)
  t.same(unready.json(), { ready: false, checks: { cache: { state: 'Syncing' } } })

  await app.inject({ method: 'POST', url: '/validate', payload: review('CREATE', 'ok', ['34.118.224.0/24']) })
  await app.inject({ method: 'POST', url: '/validate', payload: review('CREATE', 'no', ['10.0.0.0/24']) })
  await app.inject({ method: 'POST', url: '/validate', payload: '{', headers: { 'content-type': 'application/json' } })
  // Refused, yet its operation is known: a Service DELETE (the capacity webhook's rules matching
  // more than CREATE and UPDATE) is counted as a DELETE, so the misconfiguration shows which operation.
  const serviceDelete = { ...review('DELETE', 's', ['10.0.0.0/24']), request: { ...(review('DELETE', 's', ['10.0.0.0/24'])['request'] as object), kind: { group: '', version: 'v1', kind: 'Service' } } }
  t.equal((await app.inject({ method: 'POST', url: '/validate', payload: serviceDelete })).statusCode, 400)
  const metrics = await app.inject({ method: 'GET', url: '/metrics' })
  t.equal(metrics.statusCode, 200)
  t.match(metrics.body, 'servicecidr_guard_reviews_total{operation="CREATE",outcome="allowed"} 1')
  t.match(metrics.body, 'servicecidr_guard_reviews_total{operation="CREATE",outcome="denied"} 1')
  t.match(metrics.body, 'servicecidr_guard_reviews_total{operation="UNKNOWN",outcome="error"} 1')
  t.match(metrics.body, 'servicecidr_guard_reviews_total{operation="DELETE",outcome="error"} 1')
  t.match(metrics.body, 'servicecidr_guard_review_errors_total{code="SCG_INVALID_JSON"} 1')
  t.match(metrics.body, 'servicecidr_guard_decision_duration_seconds_count{operation="CREATE"} 2')
  t.match(metrics.body, 'servicecidr_guard_cache_objects{resource="servicecidrs"} 1')
  t.match(metrics.body, 'servicecidr_guard_servicecidr_usable_addresses{servicecidr="kubernetes",cidr="10.96.0.0/28"} 14')
  t.match(metrics.body, 'servicecidr_guard_servicecidr_addresses_in_use{servicecidr="kubernetes",cidr="10.96.0.0/28"} 0')
})

t.test('a Service CREATE (capacity webhook) is allowed, with a warning when addresses run low', async (t) => {
  const { app, state } = harness({ ...gke, capacity: { warnWhenFreeBelow: { IPv4: 20 } } })
  state.upsertIPAddress({ name: '10.96.0.1', family: 'IPv4', value: 0x0a600001n, familyLabel: 'IPv4', managed: true, parentRef: { group: '', resource: 'services', namespace: 'default', name: 'kubernetes' } })
  const body = {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: 'svc-1',
      kind: { group: '', version: 'v1', kind: 'Service' },
      resource: { group: '', version: 'v1', resource: 'services' },
      name: 'web',
      namespace: 'shop',
      operation: 'CREATE',
      userInfo: { username: 'alice' },
      object: { apiVersion: 'v1', kind: 'Service', metadata: { name: 'web', namespace: 'shop' }, spec: { clusterIP: '10.96.0.7', clusterIPs: ['10.96.0.7'], ipFamilies: ['IPv4'], ports: [{ port: 80 }] } },
    },
  }
  const response = await app.inject({ method: 'POST', url: '/validate', payload: body })
  t.equal(response.statusCode, 200)
  t.same(response.json(), {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    response: {
      uid: 'svc-1',
      allowed: true,
      warnings: ['servicecidr-guard: only 13 of 14 IPv4 Service addresses are free in this cluster (the policy warns below 20); add a ServiceCIDR before Services fail with "range is full"'],
    },
  })
  // An UPDATE takes an address only in a family the Service did not hold before.
  const update = (from: object, uid: string) => app.inject({ method: 'POST', url: '/validate', payload: { ...body, request: { ...body.request, uid, operation: 'UPDATE', oldObject: { ...body.request.object, spec: from } } } })
  const fromExternalName = await update({ type: 'ExternalName', externalName: 'web.example.com' }, 'svc-2')
  t.equal(fromExternalName.statusCode, 200)
  t.same(fromExternalName.json<{ response: { uid: string, allowed: boolean, warnings?: string[] } }>().response, { uid: 'svc-2', allowed: true, warnings: [response.json<{ response: { warnings: string[] } }>().response.warnings[0]] }, 'ExternalName to ClusterIP: warned')
  const portChanged = await update({ clusterIP: '10.96.0.7', clusterIPs: ['10.96.0.7'], ipFamilies: ['IPv4'], ports: [{ port: 8080 }] }, 'svc-3')
  t.same(portChanged.json<{ response: object }>().response, { uid: 'svc-3', allowed: true }, 'a port changed, the families the same: no warning')
  const metrics = await app.inject({ method: 'GET', url: '/metrics' })
  t.match(metrics.body, 'servicecidr_guard_reviews_total{operation="UPDATE",outcome="allowed"} 2')
  t.match(metrics.body, 'servicecidr_guard_reviews_total{operation="CREATE",outcome="allowed"} 1')
})
