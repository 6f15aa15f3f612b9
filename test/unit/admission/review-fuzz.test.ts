// Generated AdmissionReviews, well-formed, malformed and hostile, through decode and decide (and a
// share of them through the fastify app), every run: 12,000 reviews with a fresh seed each time
// (test/support/fuzz.ts says how to replay one). The properties:
//   - nothing throws, and every answer is an AdmissionReview that echoes the request's uid;
//   - decodeReview agrees with an independent decoding on JSON.parse (test/support/reference-review.ts);
//   - an admitted CREATE names only canonical CIDRs inside allowedRanges, outside deniedRanges,
//     within the prefix bounds and (overlap: Deny) overlapping no ServiceCIDR, each checked with
//     ipaddr.js rather than the engine's own arithmetic.

import t from 'tap'
import fc from 'fast-check'
import ipaddr from 'ipaddr.js'
import { pino } from 'pino'
import { isDeepStrictEqual } from 'node:util'
import { decodeReview } from '../../../src/admission/review.ts'
import { createReviewer, type ClusterPort, type Reviewer } from '../../../src/admission/reviewer.ts'
import type { ClusterState } from '../../../src/policy/state.ts'
import type { Policy } from '../../../src/policy/types.ts'
import { buildWebhookApp } from '../../../src/server/app.ts'
import { Metrics } from '../../../src/server/metrics.ts'
import { admin, apiserver, cluster, policy as makePolicy, serviceCIDR } from '../../support/fixtures.ts'
import { fuzzParameters } from '../../support/fuzz.ts'
import { canonicalRange, type OracleRange } from '../../support/ip-oracle.ts'
import { referenceDecode } from '../../support/reference-review.ts'

// --- CIDRs: canonical ones in a small space, so that they often overlap, and near misses -------

const v4 = (low: number, bits: number): string => {
  const address = ipaddr.fromByteArray([10, 0, (low >> 8) & 255, low & 255]).toString()
  return ipaddr.IPv4.networkAddressFromCIDR(`${address}/${bits}`).toString() + `/${bits}`
}
const v6 = (low: number, bits: number): string => {
  const bytes = [0xfd, 0, ...Array<number>(12).fill(0), (low >> 8) & 255, low & 255]
  return `${ipaddr.IPv6.networkAddressFromCIDR(`${ipaddr.fromByteArray(bytes).toString()}/${bits}`).toRFC5952String()}/${bits}`
}
/** Canonical CIDRs with prefixes between `short` and `long` bits (IPv4; IPv6 has 96 more). */
const canonicalOf = (short: number, long: number): fc.Arbitrary<string> => fc.oneof(
  fc.tuple(fc.integer({ min: 0, max: 0xffff }), fc.integer({ min: short, max: long })).map(([low, bits]) => v4(low, bits)),
  fc.tuple(fc.integer({ min: 0, max: 0xffff }), fc.integer({ min: short + 96, max: long + 96 })).map(([low, bits]) => v6(low, bits)),
)
const canonical = canonicalOf(12, 32)
const nearMiss = fc.oneof(
  fc.tuple(fc.integer({ min: 1, max: 0xffff }), fc.integer({ min: 16, max: 31 })).map(([low, bits]) => `10.0.${(low >> 8) & 255}.${low & 255}/${bits}`),
  canonical.map((cidr) => cidr.replace(/^10\.0\./, '10.00.')),
  canonical.map((cidr) => cidr.replace(/\/(\d+)$/, '/0$1')),
  canonical.map((cidr) => cidr.toUpperCase()),
  canonical.map((cidr) => (cidr.includes(':') ? cidr : `::ffff:${cidr.replace(/\/(\d+)$/, (_, bits: string) => `/${96 + Number(bits)}`)}`)),
  canonical.map((cidr) => ` ${cidr}`),
  canonical.map((cidr) => cidr.replace('/', '%eth0/')),
  fc.constantFrom('10.0.0.0/33', 'fd00::/129', '10.0.0.0', '10.0.0.0/', '/24', '', '0.0.0.0/0', '::/0', '10.0.0.0/-1', '1.2.3.4.5/32'),
  fc.string({ maxLength: 20 }),
)
const cidr = fc.oneof({ weight: 8, arbitrary: canonicalOf(14, 30) }, { weight: 1, arbitrary: nearMiss })
/** Mostly what the API allows (one CIDR, or one of each family), sometimes not. */
const cidrLists = fc.oneof(
  { weight: 12, arbitrary: cidr.map((one) => [one]) },
  { weight: 3, arbitrary: fc.tuple(canonicalOf(14, 30), canonicalOf(14, 30)).map(([a, b]) => [a, b]) },
  { weight: 1, arbitrary: fc.array(cidr, { maxLength: 4 }) },
)

// --- A policy and a cluster in the same space -------------------------------------------------

// Wide allowed ranges and narrow denied ones and ServiceCIDRs, so that a fair share of CREATEs
// pass and the property has admitted CREATEs to check.
const policies: fc.Arbitrary<Policy> = fc.record({
  allowed: fc.oneof(
    fc.constant(undefined),
    fc.tuple(canonicalOf(12, 20), canonicalOf(12, 20)).map(([a, b]) => [a, b]),
    fc.array(canonicalOf(12, 20), { minLength: 1, maxLength: 3 }),
  ),
  denied: fc.array(canonicalOf(24, 32), { maxLength: 2 }),
  v4: fc.option(fc.tuple(fc.integer({ min: 12, max: 22 }), fc.integer({ min: 20, max: 32 })), { nil: undefined, freq: 2 }),
  v6: fc.option(fc.tuple(fc.integer({ min: 108, max: 118 }), fc.integer({ min: 116, max: 128 })), { nil: undefined, freq: 2 }),
  overlap: fc.constantFrom('Deny' as const, 'Deny' as const, 'AllowExpansion' as const, 'Allow' as const),
  enforcement: fc.oneof({ weight: 6, arbitrary: fc.constant('Deny' as const) }, fc.constant('Warn' as const), fc.constant('Audit' as const)),
}).map(({ allowed, denied, v4: bounds4, v6: bounds6, overlap, enforcement }) => makePolicy({
  allowedRanges: allowed,
  deniedRanges: denied,
  prefixLength: {
    ...(bounds4 === undefined ? {} : { IPv4: { min: Math.min(...bounds4), max: Math.max(...bounds4) } }),
    ...(bounds6 === undefined ? {} : { IPv6: { min: Math.min(...bounds6), max: Math.max(...bounds6) } }),
  },
  overlap,
  enforcement,
  exemptions: { usernames: ['exempt-user'], groups: ['exempt-group'] },
}))

const names = fc.constantFrom('a', 'b', 'c', 'kubernetes', 'range-1')
const clusters = fc.array(fc.tuple(names, fc.array(canonicalOf(22, 32), { minLength: 1, maxLength: 2 })), { maxLength: 5 })
  .map((entries) => cluster({ serviceCIDRs: entries.map(([name, cidrs]) => serviceCIDR(name, ...new Set(cidrs))) }))

// --- Reviews: mostly well formed, some fields of the wrong type, some bodies broken --------------

const anyJSON = fc.jsonValue({ maxDepth: 2 })
/** Mostly the value, now and then any JSON at all in its place. */
const orJunk = <T>(value: fc.Arbitrary<T>): fc.Arbitrary<unknown> => fc.oneof({ weight: 80, arbitrary: value }, { weight: 1, arbitrary: anyJSON })
const object = fc.record({
  apiVersion: fc.constant('networking.k8s.io/v1'),
  kind: fc.constant('ServiceCIDR'),
  metadata: orJunk(fc.record({ name: orJunk(names), labels: fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 }), { maxKeys: 3 }) }, { requiredKeys: ['labels'] })),
  spec: orJunk(fc.oneof({ weight: 15, arbitrary: fc.record({ cidrs: orJunk(cidrLists) }) }, { weight: 1, arbitrary: fc.constant({}) })),
}, { requiredKeys: ['metadata', 'spec'] })

const reviews = fc.record({
  apiVersion: orJunk(fc.constant('admission.k8s.io/v1')),
  kind: orJunk(fc.constant('AdmissionReview')),
  request: orJunk(fc.record({
    uid: orJunk(fc.oneof({ weight: 30, arbitrary: fc.uuid() }, { weight: 10, arbitrary: fc.string({ minLength: 1, maxLength: 12 }) }, { weight: 1, arbitrary: fc.constant('') }, { weight: 1, arbitrary: fc.string({ minLength: 129, maxLength: 140 }) })),
    kind: orJunk(fc.oneof(
      { weight: 16, arbitrary: fc.record({ group: fc.constant('networking.k8s.io'), version: fc.constantFrom('v1', 'v1beta1'), kind: fc.constant('ServiceCIDR') }) },
      { weight: 1, arbitrary: fc.record({ group: fc.constant(''), version: fc.constant('v1'), kind: fc.constantFrom('Service', 'Pod') }) },
    )),
    name: orJunk(names),
    operation: orJunk(fc.constantFrom('CREATE', 'CREATE', 'CREATE', 'CREATE', 'CREATE', 'UPDATE', 'UPDATE', 'DELETE', 'DELETE', 'CONNECT')),
    userInfo: orJunk(fc.oneof(
      { weight: 8, arbitrary: fc.constant({ username: admin.username, groups: [...admin.groups] }) },
      { weight: 1, arbitrary: fc.constant({ username: apiserver.username, groups: [...apiserver.groups] }) },
      { weight: 1, arbitrary: fc.record({ username: fc.constantFrom('exempt-user', 'bob'), groups: fc.subarray(['exempt-group', 'dev']) }) },
    )),
    object: fc.oneof({ weight: 15, arbitrary: object }, { weight: 1, arbitrary: fc.constant(null) }),
    oldObject: fc.oneof({ weight: 3, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: object }),
    dryRun: orJunk(fc.boolean()),
    options: anyJSON,
  }, { requiredKeys: ['uid', 'kind', 'operation', 'object'] })),
})

/** The body as the apiserver would send it, or mangled: cut short, padded, a byte changed. */
const mangling = fc.oneof({ weight: 16, arbitrary: fc.constant('as is') }, { weight: 2, arbitrary: fc.constant('spaced') }, { weight: 1, arbitrary: fc.constant('cut') }, { weight: 1, arbitrary: fc.constant('byte') })
const bodies = fc.tuple(reviews, mangling, fc.nat(), fc.integer({ min: 0, max: 255 }))
  .map(([review, how, at, byte]) => {
    const text = JSON.stringify(review)
    const i = at % (text.length + 1)
    switch (how) {
      case 'cut': return Buffer.from(text.slice(0, i))
      case 'spaced': return Buffer.from(JSON.stringify(review, null, 2))
      case 'byte': return Buffer.concat([Buffer.from(text.slice(0, i)), Buffer.from([byte]), Buffer.from(text.slice(i + 1))])
      default: return Buffer.from(text)
    }
  })

// --- The policy, checked with ipaddr.js --------------------------------------------------------

type Range = OracleRange
const rangeOf = (text: string): Range => {
  const range = canonicalRange(text)
  if (range === undefined) throw new Error(`test fixture ${text} is not canonical`)
  return range
}
const inside = (inner: Range, outer: Range): boolean => inner.v6 === outer.v6 && outer.first <= inner.first && inner.last <= outer.last
const overlapping = (a: Range, b: Range): boolean => a.v6 === b.v6 && a.first <= b.last && b.first <= a.last

/** Why an admitted CREATE of `cidrs` breaks the policy, or undefined if it does not. */
function breach(policy: Policy, state: ClusterState, name: string, cidrs: readonly string[]): string | undefined {
  if (cidrs.length === 0) return 'no CIDR'
  for (const text of cidrs) {
    const range = canonicalRange(text)
    if (range === undefined) return `${text} is not canonical`
    if (policy.allowedRanges !== undefined && !policy.allowedRanges.some((allowed) => inside(range, rangeOf(allowed.text)))) return `${text} is outside allowedRanges`
    if (policy.deniedRanges.some((denied) => overlapping(range, rangeOf(denied.text)))) return `${text} overlaps deniedRanges`
    const bounds = policy.prefixLength[range.v6 ? 'IPv6' : 'IPv4']
    if (bounds !== undefined && (range.bits < bounds.min || range.bits > bounds.max)) return `${text} is outside the prefix bounds`
    // A ServiceCIDR of the same name is the object itself (kube-apiserver refuses a CREATE of a name
    // that exists: AlreadyExists), as the Overlap rule says.
    if (policy.overlap === 'Deny') {
      for (const record of state.serviceCIDRs()) {
        if (record.name !== name && record.cidrs.some((existing) => overlapping(range, rangeOf(existing.text)))) return `${text} overlaps ServiceCIDR ${record.name}`
      }
    }
  }
  return undefined
}

// --- The runs ----------------------------------------------------------------------------------

// 12,000 reviews take 8-30 s, depending on what else the machine runs: more than tap's default 30 s
// allows a file on a busy 2-core machine.
t.setTimeout(120_000)

interface Counts { reviews: number, decided: number, refused: number, admittedCreates: number, throughApp: number }

t.test('12,000 generated reviews through decode and decide', async (t) => {
  const counts: Counts = { reviews: 0, decided: 0, refused: 0, admittedCreates: 0, throughApp: 0 }
  // One app for all the runs, answering with the reviewer of the run at hand (inject is awaited, so
  // runs never overlap).
  let current: Reviewer = () => { throw new Error('no run yet') }
  let currentSynced = true
  const app = buildWebhookApp({
    logger: pino({ level: 'silent' }),
    metrics: new Metrics({ state: cluster(), synced: () => currentSynced, relists: () => 0 }, { defaultMetrics: false }),
    health: { readiness: () => ({ ready: true, checks: {} }) },
    reviewer: (body) => current(body),
  })
  const synced = fc.oneof({ weight: 9, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) })
  await fc.assert(fc.asyncProperty(policies, clusters, synced, bodies, fc.integer({ min: 0, max: 9 }), async (policy, state, synced, body, appShare) => {
    counts.reviews++
    const port: ClusterPort = { view: () => (synced ? state : undefined), current: () => Promise.resolve(), reserve: () => undefined, release: () => undefined }
    const reviewer = createReviewer({ policy: () => policy, cluster: port })
    current = reviewer
    currentSynced = synced
    const text = body.toString('utf8')

    // Decoding agrees with JSON.parse and the rules written plainly.
    const decoded = decodeReview(body)
    const reference = referenceDecode(text)
    const code = decoded.ok ? 'ok' : decoded.error.code
    if (code !== reference.code || decoded.uid !== reference.uid) throw new Error(`decoded ${code} uid ${JSON.stringify(decoded.uid)}, reference ${reference.code} uid ${JSON.stringify(reference.uid)}`)
    if (reference.code === 'ok' && !isDeepStrictEqual(decoded, reference.decoded)) throw new Error(`decoded ${JSON.stringify(decoded)}, reference ${JSON.stringify(reference.decoded)}`)

    // Nothing throws; the answer echoes the uid.
    const outcome = await reviewer(body)
    if (outcome.review.response.uid !== reference.uid) throw new Error(`answer ${JSON.stringify(outcome.review)} does not echo uid ${JSON.stringify(reference.uid)}`)
    if (outcome.verdict === 'error') counts.refused++
    else counts.decided++

    // An admitted CREATE keeps the policy.
    const request = outcome.request
    if (outcome.review.response.allowed && request?.operation === 'CREATE' && request.object !== undefined && policy.enforcement === 'Deny' &&
      !['exempt-user'].includes(request.userInfo.username) && !request.userInfo.groups.includes('exempt-group') &&
      !(request.userInfo.username === apiserver.username && request.name === 'kubernetes')) {
      counts.admittedCreates++
      const why = breach(policy, state, request.name, request.object.cidrs)
      if (why !== undefined) throw new Error(`admitted CREATE of ${JSON.stringify(request.object.cidrs)}: ${why}`)
    }

    // One in ten through the whole HTTP edge: the same answer, with the status the reviewer chose.
    if (appShare === 0) {
      counts.throughApp++
      const response = await app.inject({ method: 'POST', url: '/validate', headers: { 'content-type': 'application/json' }, payload: body })
      const answered = response.json<{ response: { uid: string } }>()
      if (body.length === 0 ? response.statusCode !== 400 : response.statusCode !== outcome.status || answered.response.uid !== reference.uid) {
        throw new Error(`through the app: ${response.statusCode} ${response.body}, expected ${outcome.status} with uid ${JSON.stringify(reference.uid)}`)
      }
    }
  }), fuzzParameters(12_000))
  t.equal(counts.reviews, 12_000, 'reviews generated and checked')
  t.ok(counts.decided > 6000 && counts.refused > 1000, `decided ${counts.decided}, refused as bad input ${counts.refused}`)
  t.ok(counts.admittedCreates > 500, `${counts.admittedCreates} admitted CREATEs checked against the policy with ipaddr.js`)
  t.ok(counts.throughApp > 800, `${counts.throughApp} through the fastify app`)
})
