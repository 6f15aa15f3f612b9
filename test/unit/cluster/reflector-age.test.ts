// The Reflector against a stand-in for kube-apiserver: when the view counts as current. A watch that
// is open but says nothing is no proof, nor is a watch's beginning; an event, a bookmark, a list and
// kube-apiserver ending a watch at its timeout are. (How it waits between requests:
// reflector.test.ts.)

import t from 'tap'
import type { ServerResponse } from 'node:http'
import { setTimeout as delay } from 'node:timers/promises'
import { Reflector } from '../../../src/cluster/reflector.ts'
import { scripted, streaming } from '../../support/apiserver.ts'

const silent = { debug: () => undefined, info: () => undefined, warn: () => undefined }
const resource = { group: 'networking.k8s.io', version: 'v1', plural: 'servicecidrs' } as const
const sink = { project: () => undefined, replace: () => undefined, upsert: () => undefined, remove: () => undefined }
const emptyList = { status: 200, body: { kind: 'List', metadata: { resourceVersion: '5' }, items: [] } }

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await delay(10)
}

const bookmark = (version: string) => ({ type: 'BOOKMARK', object: { kind: 'ServiceCIDR', apiVersion: 'networking.k8s.io/v1', metadata: { resourceVersion: version } } })

// A watch whose connection is dead without a FIN or a reset (the apiserver's node gone, a network
// partition) looks like a quiet one. Counted current while open, the view lagged the cluster for
// client-node's 30 s of silence and 5 s more: reviews admitted ranges overlapping ServiceCIDRs
// stored meanwhile (their reservations expired after 10 s).
t.test('a watch that says nothing past its timeout: the view ages from its last word, and the watch is given up', async (t) => {
  const { server, counts } = await scripted((kind) => (kind === 'list' ? emptyList : 'open'))
  t.teardown(() => server.close())
  const warnings: string[] = []
  const log = { ...silent, warn: (object: { err?: Error }) => { warnings.push(object.err?.message ?? '') } }
  const reflector = new Reflector({ kubeConfig: server.kubeConfig, resource, sink, log, now: Date.now, watchSeconds: 1 })
  t.teardown(() => reflector.stop())
  reflector.start()
  await until(() => reflector.isWatching)
  const openedAt = Date.now()
  await delay(1500)
  t.ok(reflector.isWatching, 'the first watch is still open')
  t.ok(reflector.staleFor(Date.now()) >= Date.now() - openedAt - 50, `the view is ${String(reflector.staleFor(Date.now()))} ms old: an open watch is no proof`)
  await until(() => counts.watch >= 2)
  const givenUp = Date.now() - openedAt
  t.ok(givenUp >= 2900 && givenUp < 4000, `given up ${String(givenUp)} ms after it opened: its timeout of 1 s and 2 s more, not client-node's 30 s`)
  t.equal(counts.list, 1, 'watched again from where it was, not listed')
  t.same(warnings, ['watching servicecidrs: still open 2 s after its timeout of 1 s; taken for a dead connection'])
})

t.test('a quiet view is shown current by each watch kube-apiserver ends at its timeout, and by bookmarks', async (t) => {
  // Each watch: a bookmark after 300 ms, the end at 1 s (watchSeconds), as the watch cache does it.
  const { server, counts } = await scripted((kind, n) => (kind === 'list' ? emptyList : streaming([{ afterMs: 300, event: bookmark(String(5 + n)) }], 1000)))
  t.teardown(() => server.close())
  const reflector = new Reflector({ kubeConfig: server.kubeConfig, resource, sink, log: silent, now: Date.now, watchSeconds: 1 })
  t.teardown(() => reflector.stop())
  reflector.start()
  await until(() => reflector.isWatching)
  let oldest = 0
  const deadline = Date.now() + 3500
  while (Date.now() < deadline) {
    oldest = Math.max(oldest, reflector.staleFor(Date.now()))
    await delay(20)
  }
  t.ok(oldest < 900, `the view was at most ${String(oldest)} ms old over 3.5 s`)
  t.ok(counts.watch >= 3, `${String(counts.watch)} watches, each ended at its timeout`)
  t.equal(counts.list, 1, 'not listed again')
  t.equal(reflector.lastError, undefined)
})

// After a watch that failed, the next watch's beginning is no proof either: what it owes since its
// resourceVersion (objects stored while the last one was down) comes after its headers.
t.test('after a dead watch, the next one shows the view current by its events or its end, not its beginning', async (t) => {
  const stored = { type: 'ADDED', object: { kind: 'ServiceCIDR', apiVersion: 'networking.k8s.io/v1', metadata: { name: 'other', resourceVersion: '6' }, spec: { cidrs: ['10.96.0.0/16'] } } }
  const timeouts: string[] = []
  const { server } = await scripted((kind, n) => {
    if (kind === 'list') return emptyList
    // The first watch dies silently; the second owes an event 300 ms after its headers.
    return n === 1 ? 'open' : streaming([{ afterMs: 300, event: stored }], 5000)
  })
  t.teardown(() => server.close())
  const names: string[] = []
  const reflector = new Reflector({ kubeConfig: server.kubeConfig, resource, sink: { ...sink, project: (item) => item.metadata?.name, upsert: (name: string) => { names.push(name) } }, log: silent, now: Date.now, watchSeconds: 1, backoff: { initialMs: 20, maxMs: 200 } })
  t.teardown(() => reflector.stop())
  const listedAt = Date.now()
  reflector.start()
  // The first watch is given up 3 s after it began (1 s and 2 s of grace); the second begins.
  await until(() => reflector.isWatching && Date.now() - listedAt > 3000)
  await delay(100)
  t.same(names, [], 'the object the second watch owes has not come')
  t.ok(reflector.staleFor(Date.now()) > 3000, `the view is ${String(reflector.staleFor(Date.now()))} ms old: the second watch's beginning proves nothing`)
  await until(() => names.length > 0)
  t.ok(reflector.staleFor(Date.now()) < 100, 'its event shows the view current')
  t.same(timeouts, [])
})

// kube-apiserver starts a watch's timeoutSeconds when its response begins, after any queueing
// (API Priority and Fairness): a watch whose headers come late is no dead connection.
t.test('a watch whose response begins late is not given up: its timeout counts from its beginning', async (t) => {
  const warnings: string[] = []
  const log = { ...silent, warn: (object: { err?: Error }) => { warnings.push(object.err?.message ?? '') } }
  const { server, counts } = await scripted((kind) => (kind === 'list' ? emptyList : (response: ServerResponse) => {
    const timers = [setTimeout(() => {
      response.writeHead(200, { 'content-type': 'application/json' }).flushHeaders()
      timers.push(setTimeout(() => { response.end() }, 1000))
    }, 2500)]
    response.on('close', () => { for (const timer of timers) clearTimeout(timer) })
  }))
  t.teardown(() => server.close())
  const reflector = new Reflector({ kubeConfig: server.kubeConfig, resource, sink, log, now: Date.now, watchSeconds: 1 })
  t.teardown(() => reflector.stop())
  reflector.start()
  await until(() => counts.watch >= 3)
  t.same(warnings, [], 'every watch ended at its timeout')
})

t.test('stop() leaves no watch counted open', async (t) => {
  const { server } = await scripted((kind) => (kind === 'list' ? emptyList : 'open'))
  t.teardown(() => server.close())
  const reflector = new Reflector({ kubeConfig: server.kubeConfig, resource, sink, log: silent, now: Date.now })
  reflector.start()
  await until(() => reflector.isWatching)
  await reflector.stop()
  t.notOk(reflector.isWatching)
})
