// The Reflector against a stand-in for kube-apiserver: how it waits between requests, and when the
// view counts as current. A watch closed at once with no event is no reason for a loop of requests
// (client-go's "very short watch"); the back-off grown during an outage ends with the first list
// after it, but a watch that fails after every list is no reason for a loop of lists; and a watch
// that is open but says nothing past its timeout is no proof that the view is current.

import t, { type Test } from 'tap'
import type { ServerResponse } from 'node:http'
import { setTimeout as delay } from 'node:timers/promises'
import { Reflector } from '../../../src/cluster/reflector.ts'
import { scripted, standIn, streaming } from '../../support/apiserver.ts'

const silent = { debug: () => undefined, info: () => undefined, warn: () => undefined }
const resource = { group: 'networking.k8s.io', version: 'v1', plural: 'servicecidrs' } as const
const sink = { project: () => undefined, replace: () => undefined, upsert: () => undefined, remove: () => undefined }
const emptyList = { status: 200, body: { kind: 'List', metadata: { resourceVersion: '5' }, items: [] } }
const unavailable = { status: 503, body: { kind: 'Status', code: 503, message: 'unavailable' } }
/** A watch answered and closed at once: a line that is no event, then the end. */
const closedAtOnce = { status: 200, body: { type: 'NOTHING' } }

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await delay(10)
}

t.test('a watch closed at once with no event: retried with a back-off of at most 1 s, and the view ages', async (t) => {
  const { server, counts } = await scripted((kind) => (kind === 'list' ? emptyList : closedAtOnce))
  t.teardown(() => server.close())
  const reflector = new Reflector({ kubeConfig: server.kubeConfig, resource, sink, log: silent, now: Date.now })
  t.teardown(() => reflector.stop())
  reflector.start()
  await until(() => counts.watch > 0)
  const listedAt = Date.now()
  await delay(2500)
  // 250, 500, 1000, 1000 ms apart: 4 watches in 2.5 s (without the guard, more than a thousand).
  t.ok(counts.watch <= 6, `${String(counts.watch)} watches in 2.5 s, not a request loop`)
  t.ok(counts.watch >= 3, `${String(counts.watch)} watches in 2.5 s: retried, at most 1 s apart`)
  t.equal(counts.list, 1, 'not listed again')
  t.ok(reflector.staleFor(Date.now()) >= Date.now() - listedAt, 'the view is as old as the list: no short watch made it current')
  t.match(reflector.lastError, /^watching servicecidrs: closed after \d+ ms with no event$/)
})

t.test('very short watches wait at most 1 s, and do not take on the back-off of an outage before them', async (t) => {
  // Six watches unanswered (back-off 50 ms doubling: 3.2 s by then), then watches closed at once.
  const { server, counts, watchTimes } = await scripted((kind, n) => (kind === 'list' ? emptyList : n <= 6 ? 'reset' : closedAtOnce))
  t.teardown(() => server.close())
  const reflector = new Reflector({ kubeConfig: server.kubeConfig, resource, sink, log: silent, now: Date.now, backoff: { initialMs: 50, maxMs: 30_000 } })
  t.teardown(() => reflector.stop())
  reflector.start()
  await until(() => counts.watch >= 10)
  const times = watchTimes()
  const gaps = [7, 8, 9].map((n) => (times[n] ?? 0) - (times[n - 1] ?? 0))
  t.ok(gaps.every((gap) => gap < 1500), `${gaps.join(', ')} ms between very short watches (the outage's back-off was 3.2 s)`)
})

t.test('the first list after an outage ends its back-off', async (t) => {
  // Six lists refused (back-off 50 ms doubling: 3.2 s by then); the seventh answers; the first watch
  // after it is refused, the second stays open.
  const { server, counts, watchTimes } = await scripted((kind, n) => (kind === 'list' ? (n <= 6 ? unavailable : emptyList) : n === 1 ? unavailable : 'open'))
  t.teardown(() => server.close())
  const reflector = new Reflector({ kubeConfig: server.kubeConfig, resource, sink, log: silent, now: Date.now, backoff: { initialMs: 50, maxMs: 30_000 } })
  t.teardown(() => reflector.stop())
  reflector.start()
  await until(() => counts.watch >= 2)
  const [refused = 0, next = 0] = watchTimes()
  t.ok(next - refused < 1500, `${String(next - refused)} ms between the refused watch and the next: the initial back-off, not the outage's 3.2 s`)
})

// Reviews wake a reflector out of its back-off (ClusterCache.view and current): against an apiserver
// that answers reviews yet not the LIST, one LIST a review would be a flood of LISTs.
/**
 * The lists made in 2 s against a stand-in whose answers come from `answer` (see scripted), the
 * reflector woken every 5 ms as reviews may wake it.
 */
async function listsWhileWoken(answer: Parameters<typeof scripted>[0], backoff?: { initialMs: number, maxMs: number }): Promise<number> {
  const { server, counts } = await scripted(answer)
  const reflector = new Reflector({ kubeConfig: server.kubeConfig, resource, sink, log: silent, now: Date.now, ...(backoff === undefined ? {} : { backoff }) })
  reflector.start()
  const waking = setInterval(() => { reflector.wake() }, 5)
  await delay(2000)
  clearInterval(waking)
  await reflector.stop()
  await server.close()
  return counts.list
}

t.test('wake() ends a back-off at most every 250 ms, however often it is called', async (t) => {
  const counts = { list: await listsWhileWoken(() => unavailable) }
  // Every 250 ms at most: 9 in 2 s, with the first; without the bound, one every few ms.
  t.ok(counts.list <= 10, `${String(counts.list)} LISTs in 2 s, waking every 5 ms`)
  t.ok(counts.list >= 5, `${String(counts.list)} LISTs in 2 s: woken, not waiting out the back-off (250 ms doubling)`)
})

// A review's arrival shows that kube-apiserver answers, not that RBAC now grants the LIST.
t.test('wake() does not end the back-off after a refusal a review says nothing about (403)', async (t) => {
  const forbidden = { status: 403, body: { kind: 'Status', code: 403, message: 'servicecidrs.networking.k8s.io is forbidden' } }
  const counts = { list: await listsWhileWoken(() => forbidden) }
  // 0, 250, 750, 1750 ms: the back-off alone.
  t.ok(counts.list <= 4, `${String(counts.list)} LISTs in 2 s, waking every 5 ms: the back-off, 250 ms doubling`)
})

/**
 * A stand-in that answers every watch from the first list's resourceVersion with `refusal`, and
 * none from the second list's: the reflector must list again to have a watch open.
 */
async function refusedFromFirstVersion(t: Test, refusal: { status: number, body: unknown }, what: string): Promise<void> {
  let lists = 0
  const server = await standIn((request) => {
    const url = new URL(request.url ?? '', 'http://x')
    if (url.searchParams.get('watch') !== 'true') return { status: 200, body: { kind: 'List', metadata: { resourceVersion: String(5 + lists++) }, items: [] } }
    return url.searchParams.get('resourceVersion') === '5' ? refusal : 'open'
  })
  const reflector = new Reflector({ kubeConfig: server.kubeConfig, resource, sink, log: silent, now: Date.now, backoff: { initialMs: 20, maxMs: 200 } })
  reflector.start()
  await delay(1000)
  t.equal(lists, 2, `${what}: listed again`)
  t.ok(reflector.isWatching, `${what}: a watch from the new resourceVersion is open`)
  await reflector.stop()
  await server.close()
}

// A watch ended by an ERROR event: client-go lists again (except after a 429, watched again after
// the back-off), so an error bound to the resourceVersion does not recur for ever.
t.test('a watch ended by an error event: listed again, from a new resourceVersion, except after a 429', async (t) => {
  const errorEvent = (code: number, reason: string) => ({ status: 200, body: { type: 'ERROR', object: { kind: 'Status', apiVersion: 'v1', status: 'Failure', code, reason, message: `injected ${reason}` } } })
  for (const [code, reason] of [[500, 'InternalError'], [503, 'ServiceUnavailable']] as const) {
    await refusedFromFirstVersion(t, errorEvent(code, reason), `after an error event ${String(code)}`)
  }
  const { server, counts } = await scripted((kind, n) => (kind === 'list' ? emptyList : n === 1 ? errorEvent(429, 'TooManyRequests') : 'open'))
  const reflector = new Reflector({ kubeConfig: server.kubeConfig, resource, sink, log: silent, now: Date.now, backoff: { initialMs: 20, maxMs: 200 } })
  reflector.start()
  await until(() => counts.watch >= 2)
  t.equal(counts.list, 1, 'after an error event 429: watched again, not listed')
  await reflector.stop()
  await server.close()
})

t.test('a watch request refused with a status is answered with a list; an unanswered one is watched again', async (t) => {
  const tooLarge = { status: 504, body: { kind: 'Status', apiVersion: 'v1', status: 'Failure', code: 504, reason: 'Timeout', message: 'Too large resource version: 5, current: 4' } }
  await refusedFromFirstVersion(t, tooLarge, 'after a watch refused with a 504')

  const unanswered = await scripted((kind, n) => (kind === 'list' ? emptyList : n <= 2 ? 'reset' : 'open'))
  t.teardown(() => unanswered.server.close())
  const again = new Reflector({ kubeConfig: unanswered.server.kubeConfig, resource, sink, log: silent, now: Date.now, backoff: { initialMs: 20, maxMs: 200 } })
  t.teardown(() => again.stop())
  again.start()
  await until(() => unanswered.counts.watch >= 3)
  t.equal(unanswered.counts.list, 1, 'a connection closed unanswered: watched again, not listed')
})

/** A list that completes, then watches that fail with `failure` after every list. */
async function failingAfterEveryList(t: Test, failure: { status: number, body: unknown } | ((response: ServerResponse) => void), what: string, most: number): Promise<void> {
  const counts = { list: await listsWhileWoken((kind) => (kind === 'list' ? emptyList : failure), { initialMs: 50, maxMs: 30_000 }) }
  // 0, 50, 150, 350, 750, 1550 ms: the back-off grows from one list to the next (with it started
  // over at every list, one list every 50 ms; after a 410, one every few ms).
  t.ok(counts.list <= most, `${what}: ${String(counts.list)} LISTs in 2 s, reviews waking it every 5 ms`)
  t.ok(counts.list >= 3, `${what}: ${String(counts.list)} LISTs in 2 s: listed again`)
}

t.test('a watch that fails after every list: the lists back off, and reviews do not wake them', async (t) => {
  const event = (code: number, reason: string) => ({ status: 200, body: { type: 'ERROR', object: { kind: 'Status', apiVersion: 'v1', status: 'Failure', code, reason, message: `injected ${reason}` } } })
  const added = { type: 'ADDED', object: { kind: 'ServiceCIDR', apiVersion: 'networking.k8s.io/v1', metadata: { name: 'a', resourceVersion: '6' }, spec: { cidrs: ['10.0.0.0/16'] } } }
  // Side by side, each against its own stand-in.
  await Promise.all([
    failingAfterEveryList(t, { status: 403, body: { kind: 'Status', code: 403, message: 'servicecidrs.networking.k8s.io is forbidden: cannot watch' } }, 'a watch refused with 403 (RBAC grants list, not watch)', 7),
    failingAfterEveryList(t, event(500, 'InternalError'), 'a watch ended by an ERROR event 500 (etcd watch failing)', 7),
    failingAfterEveryList(t, event(410, 'Expired'), 'a watch ended by an ERROR event 410 at once', 7),
    // A proxy in front of kube-apiserver refusing long requests: the list before it answered, so
    // a review's arrival says nothing new.
    failingAfterEveryList(t, unavailable, 'a watch refused with 503, the list answered', 7),
    // One event, then the failure: an event is no sign the watch works.
    failingAfterEveryList(t, streaming([{ afterMs: 0, event: added }, { afterMs: 20, event: event(500, 'InternalError').body }], 40), 'a watch ended by an ERROR event 500 after one event', 7),
  ])
})
