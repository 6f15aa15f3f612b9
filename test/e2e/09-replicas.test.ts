// Overlapping ranges are never both admitted, however many replicas answer. Two (or more) webhook
// replicas behind one endpoint (local: processes behind hack/local/round-robin-proxy.ts; kind: the
// Deployment's Pods behind their Service); pairs of overlapping ServiceCIDR CREATEs with different
// names are sent at the same instant through kube-apiserver, and no pair may be admitted twice.
//
// With the shared reservation switched off (SHARED_RESERVATION=0 hack/local/e2e.sh, make
// e2e-race-off) the same spec expects the opposite, double admits, so the run shows it can fail.
//
// And failing closed: with the reservations Lease gone, an admitted CREATE is refused, saying so,
// and admitted again once the Lease is back.
//
// Also measured: the latency of an admitted CREATE through kube-apiserver (client-side exact
// percentiles, and the apiserver's own histogram), in the race and one at a time, the latter side by
// side with an anchor: the same CREATEs under overlap: Allow, which reads and writes no reservation.
//
// Ranges: 10.210.0.0/16 only, under a policy of this file's own (the baseline's with allowedRanges
// [10.210.0.0/16] and prefixes /16 to /28), restored at the end. Pair k: 10.210.k.0/24 and
// 10.210.k.128/25 (k < 200); one at a time: /28s from 10.210.200.0 on; the Lease gone: 10.210.240.0/24.

import t, { type Test } from 'tap'
import { apiFailure, deniedPrefix, webhookName } from './lib/kube.ts'
import { policyWith } from './lib/policy.ts'
import { counter, histogram, parseSamples, since, summarize, type Histogram, type LatencySummary } from './lib/prom.ts'
import { begin, finish } from './lib/setup.ts'

const context = await begin(t, import.meta.url, 'replicas')
const { cluster, harness, file, spec } = context

const pairs = 200
/** Pairs in flight at once: each pair's two CREATEs leave together, pairs overlap in time. */
const concurrency = 8
const perRound = 25
const rounds = 2
const filePolicy = { allowedRanges: ['10.210.0.0/16'], prefixLength: { ipv4: { min: 16, max: 28 } } }

type Result = { readonly admitted: true, readonly ms: number } | { readonly admitted: false, readonly ms: number, readonly rule: string, readonly message: string }

async function create(name: string, cidr: string): Promise<Result> {
  const started = performance.now()
  try {
    await cluster.createServiceCIDR({ name, cidrs: [cidr], spec })
    return { admitted: true, ms: performance.now() - started }
  } catch (error) {
    const ms = performance.now() - started
    const failed = apiFailure(error)
    const message = failed?.status.message ?? ''
    if (failed?.code !== 403 || !message.startsWith(deniedPrefix)) throw new Error(`CREATE ${name} (${cidr}) failed other than by a denial: ${failed === undefined ? String(error) : `HTTP ${String(failed.code)}: ${message}`}`, { cause: error })
    return { admitted: false, ms, rule: failed.status.details?.causes?.[0]?.reason ?? '', message }
  }
}

/** Exact percentiles of what the client measured, in ms. */
function percentiles(values: readonly number[]): { count: number, p50Ms: number | undefined, p99Ms: number | undefined } {
  const sorted = [...values].sort((a, b) => a - b)
  const at = (q: number): number | undefined => (sorted.length === 0 ? undefined : Math.round((sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] as number) * 10) / 10)
  return { count: sorted.length, p50Ms: at(0.5), p99Ms: at(0.99) }
}

/** kube-apiserver's own measure of the webhook call, for admitted CREATEs. */
async function admittedCreates(): Promise<Histogram> {
  return histogram(parseSamples(await harness.apiserverMetrics()), 'apiserver_admission_webhook_admission_duration_seconds', { name: webhookName, operation: 'CREATE', rejected: 'false' })
}

const brief = (summary: LatencySummary): { count: number, meanMs: number | undefined, p50Ms: number | undefined, p99Ms: number | undefined } =>
  ({ count: summary.count, meanMs: summary.meanMs, p50Ms: summary.p50Ms, p99Ms: summary.p99Ms })

/** What the setup spec finds; read by the specs after it. */
const observed = { shared: true, replicas: 0 }

await file.spec('setup: two or more replicas behind one endpoint, and this file\'s policy (10.210.0.0/16)', async (t) => {
  observed.shared = await harness.sharedReservation()
  observed.replicas = (await harness.webhookReadiness()).length
  const { shared, replicas } = observed
  t.ok(replicas >= 2, `${String(replicas)} webhook replicas answer (the proof needs at least two)`)
  file.requirement('shared-reservation', shared, shared ? 'the replicas share their reservations' : 'the replicas run with --no-shared-reservation: this run expects double admits')
  t.comment(shared ? 'shared reservation ON: expecting no pair admitted twice' : 'shared reservation OFF: expecting pairs admitted twice')
  await harness.setPolicy(policyWith(filePolicy))
  t.pass('policy in force on every replica')
})

async function race(t: Test): Promise<void> {
  const { shared, replicas } = observed
  const apiserverBefore = await admittedCreates()
  const webhookBefore = (await harness.webhookMetrics()).map(parseSamples)
  const outcomes: Result[][] = []
  let next = 0
  await Promise.all(Array.from({ length: concurrency }, async () => {
    for (let pair = next++; pair < pairs; pair = next++) {
      outcomes[pair] = await Promise.all([
        create(`e2e-replicas-${String(pair)}-a`, `10.210.${String(pair)}.0/24`),
        create(`e2e-replicas-${String(pair)}-b`, `10.210.${String(pair)}.128/25`),
      ])
    }
  }))
  const apiserver = summarize(since(await admittedCreates(), apiserverBefore))
  const webhookAfter = (await harness.webhookMetrics()).map(parseSamples)

  const admittedPerPair = outcomes.map((pair) => pair.filter((result) => result.admitted).length)
  const both = admittedPerPair.filter((count) => count === 2).length
  const one = admittedPerPair.filter((count) => count === 1).length
  const none = admittedPerPair.filter((count) => count === 0).length
  const denials = outcomes.flat().flatMap((result) => (result.admitted ? [] : [result]))
  const admittedMs = outcomes.flat().filter((result) => result.admitted).map((result) => result.ms)
  const delta = (name: string, match: Record<string, string> = {}): number[] =>
    webhookAfter.map((samples, index) => counter(samples, name, match) - counter(webhookBefore[index] ?? [], name, match))
  const createsPerReplica = delta('servicecidr_guard_reviews_total', { operation: 'CREATE' })
  const recorded = delta('servicecidr_guard_shared_reservations_total', { outcome: 'recorded' }).reduce((a, b) => a + b, 0)
  const refused = delta('servicecidr_guard_shared_reservations_total', { outcome: 'refused' }).reduce((a, b) => a + b, 0)
  const conflicts = delta('servicecidr_guard_shared_reservation_writes_total', { result: 'conflict' }).reduce((a, b) => a + b, 0)

  const figures = {
    sharedReservation: shared,
    replicas,
    pairs,
    bothAdmitted: both,
    oneAdmitted: one,
    noneAdmitted: none,
    createsReviewedPerReplica: createsPerReplica,
    reservationsRecorded: recorded,
    refusedForAnotherReplicasReservation: refused,
    leaseWriteConflicts: conflicts,
    admittedCreateClient: percentiles(admittedMs),
    admittedCreateApiserver: brief(apiserver),
  }
  file.measure(`race (shared reservation ${shared ? 'on' : 'off'})`, figures)
  t.comment(`race: ${JSON.stringify(figures)}`)

  t.ok(createsPerReplica.every((count) => count > 0), `every replica reviewed CREATEs (${createsPerReplica.join(', ')}): the pairs were spread over the replicas`)
  t.same(denials.filter((result) => result.rule !== 'Overlap').map((result) => result.message), [], 'every refusal is an overlap, none a failure to decide')
  if (shared) {
    t.equal(both, 0, `no pair of overlapping CREATEs was admitted twice (${String(pairs)} pairs)`)
    t.equal(none, 0, 'and none was refused twice: one of each pair is admitted')
    t.ok(recorded >= one, `every admitted CREATE was recorded in the Lease (${String(recorded)})`)
  } else {
    t.ok(both > 0, `with the shared reservation off, ${String(both)} of ${String(pairs)} pairs were admitted twice: the race this file guards against is real`)
  }
}

await file.spec(`race: ${String(pairs)} pairs of overlapping CREATEs, each pair sent at once, ${String(concurrency)} pairs in flight`, race)

/** CREATEs one at a time, each admitted, under the policy in force: client and apiserver latency. */
async function oneAtATime(first: number, count: number): Promise<{ client: number[], apiserver: Histogram }> {
  const before = await admittedCreates()
  const client: number[] = []
  for (let i = first; i < first + count; i++) {
    const result = await create(`e2e-replicas-single-${String(i)}`, `10.210.${String(200 + Math.floor(i / 16))}.${String((i % 16) * 16)}/28`)
    if (!result.admitted) throw new Error(`CREATE ${String(i)} was refused: ${result.message}`)
    client.push(result.ms)
  }
  return { client, apiserver: since(await admittedCreates(), before) }
}

await file.spec(`latency of an admitted CREATE one at a time: overlap Deny (a shared reservation) against overlap Allow (none), ${String(rounds)} x ${String(perRound)} each`, async (t) => {
  const blocks = { reserving: { client: [] as number[], apiserver: [] as Histogram[] }, anchor: { client: [] as number[], apiserver: [] as Histogram[] } }
  let index = 0
  for (let round = 0; round < rounds; round++) {
    for (const block of ['reserving', 'anchor'] as const) {
      await harness.setPolicy(policyWith({ ...filePolicy, overlap: block === 'reserving' ? 'Deny' : 'Allow' }))
      const measured = await oneAtATime(index, perRound)
      index += perRound
      blocks[block].client.push(...measured.client)
      blocks[block].apiserver.push(measured.apiserver)
    }
  }
  const merge = (parts: readonly Histogram[]): LatencySummary => summarize(parts.reduce((sum, part) => ({
    count: sum.count + part.count,
    sum: sum.sum + part.sum,
    buckets: part.buckets.map(({ le, count }) => ({ le, count: count + (sum.buckets.find((bucket) => bucket.le === le)?.count ?? 0) })),
  })))
  const figures = {
    sharedReservation: observed.shared,
    reserving: { client: percentiles(blocks.reserving.client), apiserver: brief(merge(blocks.reserving.apiserver)) },
    anchorOverlapAllow: { client: percentiles(blocks.anchor.client), apiserver: brief(merge(blocks.anchor.apiserver)) },
  }
  file.measure(`one at a time (shared reservation ${observed.shared ? 'on' : 'off'})`, figures)
  t.comment(`one at a time: ${JSON.stringify(figures)}`)
  t.equal(blocks.reserving.client.length + blocks.anchor.client.length, rounds * perRound * 2, 'every CREATE was admitted')
  await harness.setPolicy(policyWith(filePolicy))
})

const leasePath = '/apis/coordination.k8s.io/v1/namespaces/servicecidr-guard-system/leases/servicecidr-guard-reservations'

await (async () => {
  const name = 'fail closed: with the reservations Lease gone, an admitted CREATE is refused and says so; back with the Lease'
  if (!observed.shared) {
    await file.skip(name, 'shared-reservation', 'the replicas do not use the Lease in this run')
    return
  }
  await file.spec(name, async (t) => {
    const read = await cluster.rawJSON('GET', leasePath)
    t.equal(read.status, 200, 'the Lease the manifests created is there')
    const { metadata } = read.body as { metadata: { name: string, namespace: string, labels?: Record<string, string>, managedFields?: { manager?: string, operation?: string }[] } }
    // The replicas' PUTs leave managedFields out (KubeLeaseStore.update): kube-apiserver keeps the
    // stored entries and adds the replicas' own. Were an update without them to reset them, the
    // entry of whoever created the Lease would be gone.
    const managers = (metadata.managedFields ?? []).map((entry) => `${entry.manager ?? '?'} (${entry.operation ?? '?'})`)
    t.ok(managers.includes('servicecidr-guard (Update)'), `the replicas' writes are recorded in managedFields: ${managers.join(', ')}`)
    t.ok(managers.some((manager) => !manager.startsWith('servicecidr-guard ')), 'and the entry of whoever created the Lease is kept')
    const deleted = await cluster.rawJSON('DELETE', leasePath)
    t.equal(deleted.status, 200, 'deleted (as an administrator might, by mistake)')
    try {
      const refused = await create('e2e-replicas-no-lease', '10.210.240.0/24')
      t.equal(refused.admitted, false, 'the CREATE is refused')
      if (!refused.admitted) {
        t.equal(refused.rule, 'OverlapUnconfirmed')
        t.match(refused.message, 'was not admitted: the overlap check across the webhook\'s replicas could not be completed: the Lease servicecidr-guard-system/servicecidr-guard-reservations does not exist (it comes with the webhook\'s manifests; apply them again). Nothing was created; retry in a few seconds')
      }
    } finally {
      // Back as the manifests declare it: no spec, no annotations.
      const restored = await cluster.rawJSON('POST', '/apis/coordination.k8s.io/v1/namespaces/servicecidr-guard-system/leases', {
        body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: metadata.name, namespace: metadata.namespace, labels: metadata.labels }, spec: {} },
      })
      t.equal(restored.status, 201, 'the Lease is created again')
    }
    const admitted = await create('e2e-replicas-no-lease', '10.210.240.0/24')
    t.ok(admitted.admitted, 'with the Lease back, the same CREATE is admitted')
  })
})()

await finish(context)
