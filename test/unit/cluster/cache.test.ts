// ClusterCache against a stand-in for kube-apiserver: stopping it ends what is in flight, so a
// shutdown is never held by an apiserver that does not answer.

import t, { type Test } from 'tap'
import type { ServerResponse } from 'node:http'
import { setTimeout as delay } from 'node:timers/promises'
import { createReviewer } from '../../../src/admission/reviewer.ts'
import { ClusterCache, watchSecondsWithin } from '../../../src/cluster/cache.ts'
import { policyFromObject } from '../../../src/config/policy.ts'
import { standIn, type StandIn } from '../../support/apiserver.ts'
import { admissionReview } from '../../support/review.ts'

const silent = { debug: () => undefined, info: () => undefined, warn: () => undefined }

const discovery = (url: string | undefined): { status: number, body: unknown } | undefined => {
  if (url === '/apis') {
    const v1 = { groupVersion: 'networking.k8s.io/v1', version: 'v1' }
    return { status: 200, body: { kind: 'APIGroupList', groups: [{ name: 'networking.k8s.io', versions: [v1], preferredVersion: v1 }] } }
  }
  if (url === '/apis/networking.k8s.io/v1') {
    return { status: 200, body: { kind: 'APIResourceList', groupVersion: 'networking.k8s.io/v1', resources: [{ name: 'servicecidrs', singularName: '', namespaced: false, kind: 'ServiceCIDR', verbs: ['list'] }] } }
  }
  return undefined
}

/**
 * A watch kube-apiserver ends at its timeoutSeconds, with no event; its end reaching the client
 * `lateMs` after that (kube-apiserver counts from when it began serving the watch).
 */
const endedAtTimeout = (url: string, lateMs = 0) => (response: ServerResponse): void => {
  const seconds = Number(new URL(url, 'http://x').searchParams.get('timeoutSeconds') ?? 25)
  response.writeHead(200, { 'content-type': 'application/json' }).flushHeaders()
  const timer = setTimeout(() => { response.end() }, seconds * 1000 + lateMs)
  response.on('close', () => { clearTimeout(timer) })
}

/** Resolves true if `promise` settles within `ms`. */
const within = (promise: Promise<unknown>, ms: number): Promise<boolean> => Promise.race([promise.then(() => true), delay(ms, false)])

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await delay(10)
}

t.test('stop() ends a LIST the apiserver never answers', async (t) => {
  const apiserver = await standIn((request) => discovery(request.url))
  t.teardown(() => apiserver.close())
  const cache = new ClusterCache({ kubeConfig: apiserver.kubeConfig, log: silent })
  void cache.start()
  await until(() => apiserver.requests.filter((url) => url.includes('/servicecidrs?') || url.includes('/ipaddresses?')).length === 2)
  t.ok(await within(cache.stop(), 2000), 'stopped within 2 s')
  t.equal(cache.syncState, 'Stopped')
})

t.test('stop() ends discovery the apiserver never answers, and it is not retried', async (t) => {
  const apiserver = await standIn(() => undefined)
  t.teardown(() => apiserver.close())
  const cache = new ClusterCache({ kubeConfig: apiserver.kubeConfig, log: silent })
  const started = cache.start()
  await until(() => apiserver.requests.length === 1)
  t.ok(await within(cache.stop(), 2000), 'stopped within 2 s')
  t.ok(await within(started, 2000), 'start() has given up within 2 s')
  t.equal(apiserver.requests.length, 1, 'no other request')
})

t.test('stop() ends the wait between two discovery attempts', async (t) => {
  const apiserver = await standIn(() => ({ status: 503, body: { kind: 'Status', code: 503, message: 'unavailable' } }))
  t.teardown(() => apiserver.close())
  const cache = new ClusterCache({ kubeConfig: apiserver.kubeConfig, log: silent })
  const started = cache.start()
  await until(() => apiserver.requests.length === 3)
  // The wait after a third failure is 2 s.
  await cache.stop()
  t.ok(await within(started, 500), 'start() has given up within 0.5 s')
})

/** An empty LIST at resourceVersion 5; a watch is left open. */
const emptyList = (url: string | undefined): { status: number, body: unknown } | 'open' =>
  (url ?? '').includes('watch=true') ? 'open' : { status: 200, body: { kind: 'List', metadata: { resourceVersion: '5' }, items: [] } }

t.test('lastError: what keeps the cache from syncing now, not what failed before', async (t) => {
  let discoveries = 0
  const apiserver = await standIn((request) => {
    if (request.url === '/apis' && discoveries++ === 0) return { status: 503, body: { kind: 'Status', code: 503, message: 'starting' } }
    return discovery(request.url) ?? emptyList(request.url)
  })
  t.teardown(() => apiserver.close())
  const cache = new ClusterCache({ kubeConfig: apiserver.kubeConfig, log: silent })
  t.teardown(() => cache.stop())
  void cache.start()
  await until(() => cache.syncState === 'Synced')
  t.equal(cache.lastError, undefined, 'the discovery that failed at first is not reported once synced')
})

t.test('onFirstSync: called once, when both resources have first listed, with the cache already Synced', async (t) => {
  let ipAddressLists = 0
  let heldList: ServerResponse | undefined
  const apiserver = await standIn((request) => {
    const url = request.url ?? ''
    if (url.startsWith('/apis/networking.k8s.io/v1/ipaddresses')) {
      if (!url.includes('watch=true') && ipAddressLists++ === 0) return (response) => { heldList = response }
      // The first watch is refused as expired (410): the reflector lists again.
      if (url.includes('watch=true') && ipAddressLists === 1) return { status: 410, body: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' } }
    }
    return discovery(url) ?? emptyList(url)
  })
  t.teardown(() => apiserver.close())
  const states: string[] = []
  const cache: ClusterCache = new ClusterCache({ kubeConfig: apiserver.kubeConfig, log: silent, onFirstSync: () => { states.push(cache.syncState) } })
  t.teardown(() => cache.stop())
  void cache.start()
  await until(() => apiserver.requests.some((url) => url.includes('/servicecidrs?') && url.includes('watch=true')))
  await until(() => heldList !== undefined)
  t.same(states, [], 'not called while the IPAddresses are still being listed')
  heldList?.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'List', metadata: { resourceVersion: '5' }, items: [] }))
  // The second list has completed: the IPAddresses were listed again.
  await until(() => cache.relists === 1)
  t.same(states, ['Synced'], 'called once, in the turn the cache became Synced; not again at the re-list')
})

t.test('onFirstSync: what it throws is logged, and is not the list\'s failure', async (t) => {
  const apiserver = await standIn((request) => discovery(request.url) ?? emptyList(request.url))
  t.teardown(() => apiserver.close())
  const warnings: string[] = []
  const log = { ...silent, warn: (_object: object, message: string) => { warnings.push(message) } }
  const cache = new ClusterCache({ kubeConfig: apiserver.kubeConfig, log, onFirstSync: () => { throw new Error('broken') } })
  t.teardown(() => cache.stop())
  void cache.start()
  await until(() => warnings.length > 0)
  await delay(100)
  t.same(warnings, ['onFirstSync failed'])
  t.equal(cache.syncState, 'Synced')
  t.equal(cache.lastError, undefined)
  t.equal(cache.relists, 0, 'nothing listed again')
})

t.test('lastError: a LIST that fails says which and why', async (t) => {
  const apiserver = await standIn((request) => {
    if ((request.url ?? '').startsWith('/apis/networking.k8s.io/v1/ipaddresses')) {
      return { status: 403, body: { kind: 'Status', code: 403, message: 'ipaddresses.networking.k8s.io is forbidden: User "system:serviceaccount:x:y" cannot list resource "ipaddresses"' } }
    }
    return discovery(request.url) ?? emptyList(request.url)
  })
  t.teardown(() => apiserver.close())
  const cache = new ClusterCache({ kubeConfig: apiserver.kubeConfig, log: silent })
  t.teardown(() => cache.stop())
  void cache.start()
  await until(() => apiserver.requests.some((url) => url.includes('/ipaddresses?')))
  await delay(50)
  t.equal(cache.syncState, 'Syncing')
  t.equal(cache.lastError, 'listing ipaddresses: HTTP 403: ipaddresses.networking.k8s.io is forbidden: User "system:serviceaccount:x:y" cannot list resource "ipaddresses"')
})

t.test('a discovery the apiserver does not answer is given up after its timeout and tried again', async (t) => {
  let calls = 0
  // The first discovery request hangs; the ones after it are answered.
  const apiserver = await standIn((request) => (request.url === '/apis' && ++calls === 1 ? undefined : discovery(request.url) ?? emptyList(request.url)))
  t.teardown(() => apiserver.close())
  const cache = new ClusterCache({ kubeConfig: apiserver.kubeConfig, log: silent, discoveryTimeoutMs: 200 })
  t.teardown(() => cache.stop())
  void cache.start()
  await until(() => cache.lastError !== undefined)
  t.equal(cache.lastError, 'ServiceCIDR API discovery: no answer from kube-apiserver within 0.2 s', 'says why it is not ready')
  await until(() => cache.version !== undefined)
  t.equal(cache.version, 'v1', 'found on the next attempt')
  t.ok(calls >= 2, 'discovery was tried again')
})

t.test('stop() ends a watch whose response has not begun', async (t) => {
  // LISTs are answered; watches get no response headers at all.
  const apiserver = await standIn((request) => discovery(request.url) ?? ((request.url ?? '').includes('watch=true') ? undefined : emptyList(request.url)))
  t.teardown(() => apiserver.close())
  const cache = new ClusterCache({ kubeConfig: apiserver.kubeConfig, log: silent })
  void cache.start()
  await until(() => apiserver.requests.filter((url) => url.includes('watch=true')).length === 2)
  t.ok(await within(cache.stop(), 2000), 'stopped within 2 s')
  t.equal(cache.syncState, 'Stopped')
})

// After an outage shorter than staleAfterMs the view is still counted current; a reflector waiting
// out the back-off the outage grew must not leave it so for seconds after kube-apiserver is back.
t.test('a review (view()) wakes a reflector out of its back-off once kube-apiserver answers', async (t) => {
  let watches = 0
  let watchRefused = true
  const watchTimes: number[] = []
  const apiserver = await standIn((request) => {
    if ((request.url ?? '').includes('watch=true')) {
      watches++
      watchTimes.push(Date.now())
      // kube-apiserver going away: the connection closed unanswered (watched again, not listed).
      if (watchRefused) {
        request.socket.destroy()
        return undefined
      }
    }
    return discovery(request.url) ?? emptyList(request.url)
  })
  t.teardown(() => apiserver.close())
  const cache = new ClusterCache({ kubeConfig: apiserver.kubeConfig, log: silent })
  t.teardown(() => cache.stop())
  void cache.start()
  // Both reflectors refused 5 times, waiting 250, 500, 1000 and 2000 ms between; the wait after
  // the fifth is 4 s.
  await until(() => watches >= 10)
  await delay(100)
  watchRefused = false
  t.equal(cache.syncState, 'Synced', 'still counted current, within staleAfterMs')
  const woken = Date.now()
  t.not(cache.view(), undefined)
  await until(() => (watchTimes.at(-1) ?? 0) >= woken)
  const after = (watchTimes.at(-1) ?? 0) - woken
  t.ok(after < 1000, `watched again ${String(after)} ms after the review, not after the 4 s back-off`)
})

/**
 * A cache over `apiserver` with reviewStaleAfterMs 300: reviewed from once listed, then, 400 ms on
 * with nothing shown since (`why`), Synced still (ready) but not reviewed from.
 */
async function untrustedWhileSynced(t: Test, apiserver: StandIn, currentWaitMs: number, why: string): Promise<ClusterCache> {
  t.teardown(() => apiserver.close())
  const cache = new ClusterCache({ kubeConfig: apiserver.kubeConfig, log: silent, reviewStaleAfterMs: 300, currentWaitMs })
  t.teardown(() => cache.stop())
  void cache.start()
  await until(() => cache.syncState === 'Synced')
  t.not(cache.view(), undefined, 'just listed: reviewed from')
  await delay(400)
  t.equal(cache.syncState, 'Synced', 'still Synced: ready, within staleAfterMs')
  t.equal(cache.view(), undefined, `${why}: not reviewed from`)
  return cache
}

// A reservation lasts its TTL; a replica whose watch has been down longer than the TTL's margin may
// lack an object whose reservation has expired (src/server/serve.ts, reviewStaleAfterMs). Reviews
// stop trusting such a view though the replica stays Synced (ready), and wait for the watch.
t.test('a view without an open watch for longer than reviewStaleAfterMs is not reviewed from, though still Synced', async (t) => {
  let watchRefused = true
  const apiserver = await standIn((request) => {
    const url = request.url ?? ''
    if (url.includes('watch=true')) {
      // 429: watched again after a back-off, without a new list (a list would make the view current).
      if (watchRefused) return { status: 429, body: { kind: 'Status', code: 429, message: 'too many requests' } }
      // Quiet, and ended at its timeoutSeconds, as kube-apiserver ends it.
      return endedAtTimeout(url)
    }
    return discovery(url) ?? emptyList(url)
  })
  const cache = await untrustedWhileSynced(t, apiserver, 2000, 'no watch for longer than reviewStaleAfterMs')
  watchRefused = false
  const waited = Date.now()
  await cache.current()
  await cache.current()
  // The watch's beginning is no proof: its end at the timeout it asks for after a failure (1 s) is.
  t.not(cache.view(), undefined, `reviewed from again once a watch has ended at its timeout (${String(Date.now() - waited)} ms)`)
  t.ok(Date.now() - waited < 2500, 'the review woke the watch out of its back-off, and that watch asked for a timeout of 1 s')
})

// The first review after an outage, in a quiet cluster: it wakes the watch, and the first proof
// that the view is current is that watch's end at the 1 s it asks for after a failure. A default
// wait shorter than that refused this review though kube-apiserver was back (the e2e suite's
// kube-apiserver restart, 05-faults, once in CI: the CREATE right after it).
t.test('the first review after an outage waits long enough, by default, for the watch it wakes', async (t) => {
  let watches = 0
  let watchRefused = true
  const apiserver = await standIn((request) => {
    const url = request.url ?? ''
    if (url.includes('watch=true')) {
      watches++
      // kube-apiserver going away: the connection closed unanswered (watched again, not listed).
      if (watchRefused) {
        request.socket.destroy()
        return undefined
      }
      // Back, and quiet: the watch ends at its timeoutSeconds, reaching the client 200 ms after it
      // (a kube-apiserver just restarted, queuing requests and starting its watch cache).
      return endedAtTimeout(url, 200)
    }
    return discovery(url) ?? emptyList(url)
  })
  t.teardown(() => apiserver.close())
  const cache = new ClusterCache({ kubeConfig: apiserver.kubeConfig, log: silent, reviewStaleAfterMs: 300 })
  t.teardown(() => cache.stop())
  void cache.start()
  // Both reflectors refused 5 times (as in the test above); each now waits out a 4 s back-off.
  await until(() => watches >= 10)
  await delay(100)
  watchRefused = false
  t.equal(cache.syncState, 'Synced', 'still Synced (ready), within staleAfterMs')
  const waited = Date.now()
  t.equal(cache.view(), undefined, 'the review finds the view untrusted, and wakes both watches')
  await cache.current()
  t.not(cache.view(), undefined, `one wait of the default length, and it is reviewed from (${String(Date.now() - waited)} ms)`)
})

// A watch whose connection died without a FIN or a reset is open, and silent, as a quiet one is:
// reviews must not trust the view for as long as it stays open (client-node's 30 s of silence).
t.test('open watches that say nothing: not reviewed from once the view is older than reviewStaleAfterMs', async (t) => {
  const apiserver = await standIn((request) => discovery(request.url) ?? emptyList(request.url))
  await untrustedWhileSynced(t, apiserver, 100, 'both watches open, silent for 400 ms')
})

t.test('watchSecondsWithin: each watch ends before reviews stop trusting a quiet view', (t) => {
  t.equal(watchSecondsWithin(5000), 3, "serve's defaults: 3 s against 5 s")
  t.equal(watchSecondsWithin(4500), 3)
  t.equal(watchSecondsWithin(3000), 1)
  t.equal(watchSecondsWithin(2000), 1)
  t.equal(watchSecondsWithin(0), 1, 'at least 1 s')
  t.equal(watchSecondsWithin(30_000), 25, 'at most 25 s')
  t.end()
})

// The guarantee the view's age protects: a replica whose ServiceCIDR watch died silently never
// shows a ServiceCIDR another replica admitted and kube-apiserver stored, and once that
// reservation has expired, only the view's age keeps this replica from admitting a range
// overlapping it. Counted current while open, the watch let it do so for ~35 s.
t.test('a ServiceCIDR watch that died silently: a CREATE overlapping what it missed is refused, not admitted', async (t) => {
  let stored = false
  const apiserver = await standIn((request) => {
    const url = request.url ?? ''
    const listed = { status: 200, body: { kind: 'List', metadata: { resourceVersion: '10' }, items: stored && url.includes('/servicecidrs') ? [{ metadata: { name: 'other' }, spec: { cidrs: ['10.96.0.0/16'] } }] : [] } }
    if (!url.includes('watch=true')) return discovery(url) ?? listed
    // The ServiceCIDR watch: open and silent for ever, its connection dead. IPAddresses: quiet.
    return 'open'
  })
  t.teardown(() => apiserver.close())
  const cache = new ClusterCache({ kubeConfig: apiserver.kubeConfig, log: silent, reviewStaleAfterMs: 300, currentWaitMs: 100 })
  t.teardown(() => cache.stop())
  void cache.start()
  await until(() => cache.syncState === 'Synced')
  stored = true
  const policy = policyFromObject({ apiVersion: 'servicecidr-guard/v1alpha1', kind: 'Policy', metadata: { name: 'p' }, spec: { overlap: 'Deny' } }, 'p')
  const review = createReviewer({ policy: () => policy, cluster: cache })
  await delay(400)
  const outcome = await review(Buffer.from(JSON.stringify(admissionReview('CREATE', 'mine', ['10.96.1.0/24']))))
  t.equal(outcome.verdict, 'denied', 'the view is older than reviewStaleAfterMs: the overlap rule fails closed')
  t.match(outcome.decision?.message ?? '', "servicecidr-guard has not finished reading the cluster's ServiceCIDRs")
})
