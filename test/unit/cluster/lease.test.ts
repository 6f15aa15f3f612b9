// KubeLeaseStore over real HTTPS against a small stand-in for kube-apiserver's Lease endpoint: the
// kubeconfig's CA and token are used, a PUT carries the resourceVersion it read and is refused with
// 409 when it is stale, every status maps to a kind, a hung server times out, and requests share one
// kept-alive connection.

import { KubeConfig } from '@kubernetes/client-node'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import type { ServerResponse } from 'node:http'
import { createServer, type Server } from 'node:https'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { KubeLeaseStore, StoreError, kindOfStatus, storedLease, type LeaseObject } from '../../../src/cluster/lease.ts'

const dir = mkdtempSync(join(tmpdir(), 'scg-lease-'))
t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=localhost',
  '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', join(dir, 'tls.key'), '-out', join(dir, 'tls.crt')], { stdio: 'ignore' })

const path = '/apis/coordination.k8s.io/v1/namespaces/servicecidr-guard-system/leases/servicecidr-guard-reservations'

interface Apiserver {
  server: Server
  port: number
  requests: { method: string, url: string, authorization: string | undefined, body: string }[]
  connections: number
  /** Answers the next request with this status and body instead of serving the Lease. */
  next: { status: number, body: unknown } | undefined
  hang: boolean
}

async function apiserver(): Promise<Apiserver> {
  let lease: LeaseObject = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'servicecidr-guard-reservations', namespace: 'servicecidr-guard-system', resourceVersion: '7' }, spec: {} }
  const state: Apiserver = { server: undefined as unknown as Server, port: 0, requests: [], connections: 0, next: undefined, hang: false }
  const reply = (response: ServerResponse, status: number, body: unknown): void => {
    response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body))
  }
  state.server = createServer({ key: readFileSync(join(dir, 'tls.key')), cert: readFileSync(join(dir, 'tls.crt')) }, (request, response) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      state.requests.push({ method: request.method ?? '', url: request.url ?? '', authorization: request.headers.authorization, body: Buffer.concat(chunks).toString('utf8') })
      if (state.hang) return
      if (state.next !== undefined) {
        reply(response, state.next.status, state.next.body)
        state.next = undefined
        return
      }
      if (!(request.url ?? '').startsWith(path)) {
        reply(response, 404, { kind: 'Status', message: 'not found' })
        return
      }
      if (request.method === 'GET') {
        reply(response, 200, lease)
        return
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as LeaseObject
      if (body.metadata?.resourceVersion !== lease.metadata?.resourceVersion) {
        reply(response, 409, { kind: 'Status', code: 409, reason: 'Conflict', message: 'Operation cannot be fulfilled on leases.coordination.k8s.io "servicecidr-guard-reservations": the object has been modified; please apply your changes to the latest version and try again' })
        return
      }
      // An update without managedFields keeps the stored ones, as kube-apiserver does (decodeLiveOrNew,
      // k8s.io/apimachinery/pkg/util/managedfields/internal/fieldmanager.go); its own entry aside.
      const managedFields = body.metadata?.managedFields ?? lease.metadata?.managedFields
      lease = { ...body, metadata: { ...body.metadata, resourceVersion: String(Number(lease.metadata?.resourceVersion) + 1), ...(managedFields === undefined ? {} : { managedFields }) } }
      reply(response, 200, lease)
    })
  })
  state.server.on('secureConnection', () => { state.connections++ })
  await new Promise<void>((resolve) => state.server.listen(0, '127.0.0.1', resolve))
  state.port = (state.server.address() as AddressInfo).port
  return state
}

function kubeConfig(port: number, prefix = ''): KubeConfig {
  const config = new KubeConfig()
  config.loadFromOptions({
    clusters: [{ name: 'c', server: `https://127.0.0.1:${String(port)}${prefix}`, caData: readFileSync(join(dir, 'tls.crt')).toString('base64'), skipTLSVerify: false }],
    users: [{ name: 'u', token: 'the-token' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  })
  return config
}

async function kind(call: Promise<unknown>): Promise<{ kind: string, message: string }> {
  try {
    await call
  } catch (error) {
    if (error instanceof StoreError) return { kind: error.kind, message: error.message }
    throw error
  }
  throw new Error('expected a StoreError')
}

t.test('GET, then PUT with the resourceVersion read; a stale one is a conflict', async (t) => {
  const server = await apiserver()
  t.teardown(() => { server.server.close() })
  const store = new KubeLeaseStore(kubeConfig(server.port), 'servicecidr-guard-system', 'servicecidr-guard-reservations')
  t.teardown(() => { store.close() })
  t.equal(store.where, 'servicecidr-guard-system/servicecidr-guard-reservations')
  const read = await store.get(1000)
  t.equal(read.metadata?.resourceVersion, '7')
  const written = await store.update({ ...read, metadata: { ...read.metadata, annotations: { a: 'b' } } }, 1000)
  t.equal(written.metadata?.resourceVersion, '8')
  t.same(written.metadata?.annotations, { a: 'b' })
  t.same(await kind(store.update(read, 1000)), {
    kind: 'conflict',
    message: 'PUT Lease servicecidr-guard-system/servicecidr-guard-reservations: HTTP 409: Operation cannot be fulfilled on leases.coordination.k8s.io "servicecidr-guard-reservations": the object has been modified; please apply your changes to the latest version and try again',
  })
  t.same(server.requests.map(({ method, url }) => `${method} ${url}`), [`GET ${path}`, `PUT ${path}?fieldManager=servicecidr-guard`, `PUT ${path}?fieldManager=servicecidr-guard`])
  t.ok(server.requests.every((request) => request.authorization === 'Bearer the-token'), 'the kubeconfig\'s credentials')
  t.equal(server.connections, 1, 'one TLS connection, kept alive for every request')
})

t.test('a PUT leaves managedFields out: kube-apiserver keeps the stored ones', async (t) => {
  const server = await apiserver()
  t.teardown(() => { server.server.close() })
  const store = new KubeLeaseStore(kubeConfig(server.port), 'servicecidr-guard-system', 'servicecidr-guard-reservations')
  t.teardown(() => { store.close() })
  const managedFields = [{ manager: 'kubectl-client-side-apply', operation: 'Update', apiVersion: 'coordination.k8s.io/v1', fieldsType: 'FieldsV1', fieldsV1: { 'f:metadata': { 'f:labels': {} } } }]
  const read = await store.get(1000)
  const written = await store.update({ ...read, metadata: { ...read.metadata, labels: { app: 'x' }, managedFields, annotations: { a: 'b' } } }, 1000)
  const sent = JSON.parse(server.requests.at(-1)?.body ?? '{}') as LeaseObject
  t.same(sent.metadata, { name: 'servicecidr-guard-reservations', namespace: 'servicecidr-guard-system', resourceVersion: '7', labels: { app: 'x' }, annotations: { a: 'b' } }, 'everything else in metadata is sent as read')
  t.same(sent['spec'], {}, 'and the rest of the Lease')
  t.same(written.metadata?.annotations, { a: 'b' })
})

// The PUT's answer is the whole Lease, reservations and all: only its resourceVersion is read.
t.test('a PUT answers the Lease as sent, at the resourceVersion kube-apiserver answers', async (t) => {
  const server = await apiserver()
  t.teardown(() => { server.server.close() })
  const store = new KubeLeaseStore(kubeConfig(server.port), 'servicecidr-guard-system', 'servicecidr-guard-reservations')
  t.teardown(() => { store.close() })
  const read = await store.get(1000)
  const sent = { ...read, metadata: { ...read.metadata, annotations: { a: 'b' } } }
  server.next = { status: 200, body: { metadata: { annotations: { a: 'changed on the way', resourceVersion: '1' }, resourceVersion: '12' }, spec: { holderIdentity: 'x' } } }
  t.same(await store.update(sent, 1000), { ...sent, metadata: { ...sent.metadata, resourceVersion: '12' } }, 'what was sent, at the new version')
  const what = 'PUT Lease servicecidr-guard-system/servicecidr-guard-reservations'
  const answers: [unknown, string][] = [
    [{ metadata: { name: 'l' } }, `${what}: the answer has no metadata.resourceVersion`],
    [{ metadata: { resourceVersion: 12 } }, `${what}: the answer has no metadata.resourceVersion`],
    ['not a lease', `${what}: the answer is not an object`],
  ]
  for (const [body, message] of answers) {
    server.next = { status: 200, body }
    t.same(await kind(store.update(sent, 1000)), { kind: 'unavailable', message }, message)
  }
  t.equal(storedLease(sent, '{"metadata":{"resource\\u0056ersion":"13"}}', what).metadata?.resourceVersion, '13', 'an answer the quick read cannot follow is parsed whole')
  t.throws(() => storedLease(sent, '{"metadata":{"name":"l"', what), new StoreError('unavailable', `${what}: the answer is not JSON`))
})

t.test('statuses map to kinds; a hung apiserver times out; a closed port is unavailable', async (t) => {
  const server = await apiserver()
  t.teardown(() => { server.server.close() })
  const store = new KubeLeaseStore(kubeConfig(server.port), 'servicecidr-guard-system', 'servicecidr-guard-reservations')
  t.teardown(() => { store.close() })
  const cases = [
    { status: 404, kind: 'missing' },
    { status: 403, kind: 'forbidden' },
    { status: 401, kind: 'forbidden' },
    { status: 422, kind: 'rejected' },
    { status: 429, kind: 'unavailable' },
    { status: 503, kind: 'unavailable' },
  ]
  for (const { status, kind: expected } of cases) {
    server.next = { status, body: { kind: 'Status', message: `status ${String(status)}` } }
    t.same(await kind(store.get(1000)), { kind: expected, message: `GET Lease servicecidr-guard-system/servicecidr-guard-reservations: HTTP ${String(status)}: status ${String(status)}` }, `HTTP ${String(status)}`)
    t.equal(kindOfStatus(status), expected)
  }
  server.next = { status: 200, body: 'not a lease' }
  t.same(await kind(store.get(1000)), { kind: 'unavailable', message: 'GET Lease servicecidr-guard-system/servicecidr-guard-reservations: the answer is not an object' }, 'a 200 that is not an object')

  server.hang = true
  const began = performance.now()
  t.same(await kind(store.get(100)), { kind: 'timeout', message: 'GET Lease servicecidr-guard-system/servicecidr-guard-reservations: no answer within 100 ms' })
  t.ok(performance.now() - began < 1000, 'gave up at its timeout')
  server.hang = false

  const closed = await apiserver()
  await new Promise((resolve) => closed.server.close(resolve))
  const nowhere = new KubeLeaseStore(kubeConfig(closed.port), 'servicecidr-guard-system', 'servicecidr-guard-reservations')
  t.teardown(() => { nowhere.close() })
  t.match(await kind(nowhere.get(1000)), { kind: 'unavailable', message: /ECONNREFUSED/ })
})

// Rancher's cluster proxy, an API gateway or kubectl proxy --api-prefix put the API under a path;
// kubectl, client-go and this project's LISTs and watches keep it.
t.test('a server URL with a path: requests go under it', async (t) => {
  const server = await apiserver()
  t.teardown(() => { server.server.close() })
  const store = new KubeLeaseStore(kubeConfig(server.port, '/k8s/clusters/c-m-1/'), 'servicecidr-guard-system', 'servicecidr-guard-reservations')
  t.teardown(() => { store.close() })
  server.next = { status: 200, body: { kind: 'Lease' } }
  await store.get(1000)
  t.same(server.requests.map(({ url }) => url), [`/k8s/clusters/c-m-1${path}`])
})
