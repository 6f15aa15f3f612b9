// The limits of src/server/limits.ts: the in-flight budget (with inject, exact JSON), and the
// timeouts and connection limit on a real HTTPS listener, with limits small enough to watch.

import t from 'tap'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { connect as tcpConnect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import { connect as tlsConnect, type TLSSocket } from 'node:tls'
import type { LightMyRequestResponse } from 'fastify'
import { pino } from 'pino'
import { createReviewer } from '../../../src/admission/reviewer.ts'
import { parsePolicy } from '../../../src/config/policy.ts'
import { ClusterState } from '../../../src/policy/state.ts'
import { buildWebhookApp } from '../../../src/server/app.ts'
import { secureContextOptions, checkKeyPair } from '../../../src/server/certificate.ts'
import { InFlightBudget, LargeBodyRate, webhookLimits, type Limits } from '../../../src/server/limits.ts'
import { Metrics } from '../../../src/server/metrics.ts'

const KiB = 1024
const dir = mkdtempSync(join(tmpdir(), 'scg-limits-'))
t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=localhost',
  '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1', '-keyout', join(dir, 'tls.key'), '-out', join(dir, 'tls.crt')], { stdio: 'ignore' })
const ca = readFileSync(join(dir, 'tls.crt'), 'utf8')
const pair = checkKeyPair(readFileSync(join(dir, 'tls.crt')), readFileSync(join(dir, 'tls.key')))

const policy = parsePolicy('apiVersion: servicecidr-guard/v1alpha1\nkind: Policy\nspec:\n  allowedRanges: [34.118.224.0/20]\n', 'test')

function app(limits: Limits, https = false): ReturnType<typeof buildWebhookApp> {
  const state = new ClusterState()
  return buildWebhookApp({
    logger: pino({ level: 'silent' }),
    metrics: new Metrics({ state, synced: () => true, relists: () => 0 }, { defaultMetrics: false }),
    health: { readiness: () => ({ ready: true, checks: {} }) },
    reviewer: createReviewer({ policy: () => policy, cluster: { view: () => state, current: () => Promise.resolve(), reserve: () => undefined, release: () => undefined } }),
    limits,
    ...(https ? { https: secureContextOptions(pair) } : {}),
  })
}

/** A CREATE review padded (in request.options, which the webhook does not read) to exactly `bytes`. */
function review(uid: string, bytes = 0): string {
  const body = {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid,
      kind: { group: 'networking.k8s.io', version: 'v1', kind: 'ServiceCIDR' },
      name: uid,
      operation: 'DELETE',
      userInfo: { username: 'alice' },
      oldObject: { metadata: { name: uid }, spec: { cidrs: ['34.118.224.0/24'] } },
      options: { padding: '' },
    },
  }
  const padding = Math.max(0, bytes - JSON.stringify(body).length)
  body.request.options.padding = 'x'.repeat(padding)
  return JSON.stringify(body)
}

const allowed = (uid: string): unknown => ({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid, allowed: true } })
const overloaded = (detail: string): unknown => ({
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  response: { uid: '', allowed: false, status: { code: 429, reason: 'TooManyRequests', message: `servicecidr-guard: too many request bytes are in flight on this replica; retry after the Retry-After delay (${detail}) [SCG_OVERLOADED]` } },
})

/** Budget: 64 KiB, of which 32 KiB only for bodies of up to 8 KiB; 1 KiB a request. */
const small: Limits = { ...webhookLimits, inFlightBytes: 64 * KiB, reservedBytes: 32 * KiB, smallBodyBytes: 8 * KiB, requestBytes: 1 * KiB }

t.test('the in-flight budget keeps its reserve for small bodies', (t) => {
  const budget = new InFlightBudget(small)
  t.equal(budget.available(true), 32 * KiB)
  t.equal(budget.available(false), 64 * KiB)
  t.ok(budget.take(30 * KiB, true))
  t.notOk(budget.take(3 * KiB, true), 'a large body may not touch the reserve')
  t.ok(budget.take(33 * KiB, false), 'a small one may')
  t.notOk(budget.take(2 * KiB, false), 'and nothing is left')
  budget.give(63 * KiB)
  t.equal(budget.inUse, 0)
  t.end()
})

t.test('large bodies are let in at largeBytesPerSecond, after a burst of one largest body', (t) => {
  let now = 0
  const rate = new LargeBodyRate({ ...webhookLimits, bodyBytes: 100 * KiB, largeBytesPerSecond: 10 * KiB }, () => now)
  t.ok(rate.take(60 * KiB), 'the bucket starts full: one largest body at once')
  t.notOk(rate.take(60 * KiB), '40 KiB left')
  now = 2000
  t.ok(rate.take(60 * KiB), 'two seconds later, 20 KiB more')
  now = 1_000_000
  t.ok(rate.take(100 * KiB), 'never more than one largest body saved up')
  t.notOk(rate.take(1))
  t.end()
})

t.test('a large body over the rate is refused with 429 before it is read; small ones are not rated', async (t) => {
  const server = app({ ...small, bodyBytes: 40 * KiB, largeBytesPerSecond: 1 * KiB })
  const post = (uid: string, bytes: number): Promise<LightMyRequestResponse> => server.inject({ method: 'POST', url: '/validate', headers: { 'content-type': 'application/json' }, payload: review(uid, bytes) })
  t.same((await post('first', 20 * KiB)).json(), allowed('first'))
  t.same((await post('second', 19 * KiB)).json(), allowed('second'))
  const third = await post('third', 20 * KiB)
  t.equal(third.statusCode, 429)
  t.same(third.json(), overloaded(`content-length ${20 * KiB}, over the rate for large bodies`))
  t.same((await post('small', 4 * KiB)).json(), allowed('small'))
  t.same((await post('another small', 4 * KiB)).json(), allowed('another small'))
})

t.test('a body the budget cannot hold is refused with 429 before it is read; a small review still passes', async (t) => {
  const server = app(small)
  // A holds 1 KiB + the 16 KiB it has sent of its 20 KiB: the large share has 15 KiB left.
  const aBody = review('a', 20 * KiB)
  const aStream = new PassThrough()
  const a = server.inject({ method: 'POST', url: '/validate', headers: { 'content-type': 'application/json', 'content-length': String(aBody.length) }, payload: aStream })
  aStream.write(aBody.slice(0, 16 * KiB))
  await new Promise((resolve) => setTimeout(resolve, 50))

  const b = await server.inject({ method: 'POST', url: '/validate', headers: { 'content-type': 'application/json' }, payload: review('b', 16 * KiB) })
  t.equal(b.statusCode, 429)
  t.equal(b.headers['retry-after'], '1')
  t.equal(b.headers['connection'], 'close')
  t.same(b.json(), overloaded(`content-length ${16 * KiB}`))

  const c = await server.inject({ method: 'POST', url: '/validate', headers: { 'content-type': 'application/json' }, payload: review('c') })
  t.equal(c.statusCode, 200, 'an ordinary review uses the reserve')
  t.same(c.json(), allowed('c'))

  aStream.end(aBody.slice(16 * KiB))
  const aDone = await a
  t.equal(aDone.statusCode, 200)
  t.same(aDone.json(), allowed('a'))

  // Everything was given back: the whole large share is available again.
  const d = await server.inject({ method: 'POST', url: '/validate', headers: { 'content-type': 'application/json' }, payload: review('d', 31 * KiB) })
  t.same(d.json(), allowed('d'))
})

t.test('a body is charged until its response is closed, however long the handler takes', async (t) => {
  const server = app(small)
  let release: () => void = () => undefined
  const held = new Promise<void>((resolve) => { release = resolve })
  // An answer that waits, as an asynchronous handler awaiting I/O would.
  server.addHook('onSend', async (request) => {
    if (request.headers['x-hold'] !== undefined) await held
  })
  const slow = server.inject({ method: 'POST', url: '/validate', headers: { 'content-type': 'application/json', 'x-hold': '1' }, payload: review('slow', 24 * KiB) })
  await new Promise((resolve) => setTimeout(resolve, 50))
  const refused = await server.inject({ method: 'POST', url: '/validate', headers: { 'content-type': 'application/json' }, payload: review('large', 10 * KiB) })
  t.equal(refused.statusCode, 429, 'the waiting request still holds its 25 KiB')
  release()
  t.same((await slow).json(), allowed('slow'))
  const now = await server.inject({ method: 'POST', url: '/validate', headers: { 'content-type': 'application/json' }, payload: review('large', 10 * KiB) })
  t.same(now.json(), allowed('large'))
})

// --- A real HTTPS listener -----------------------------------------------------------------------

const quick: Limits = {
  ...webhookLimits,
  maxConnections: 4,
  handshakeTimeoutMs: 300,
  // Well below the request timeout: unset, Node's headersTimeout is min(60 s, requestTimeout), so
  // only a bound under 600 ms tells the two apart.
  headersTimeoutMs: 200,
  requestTimeoutMs: 600,
  idleTimeoutMs: 900,
  keepAliveTimeoutMs: 400,
  timeoutCheckMs: 50,
}

async function listening(limits: Limits, setup: (server: ReturnType<typeof app>) => void = () => undefined): Promise<{ port: number, close: () => Promise<void> }> {
  const server = app(limits, true)
  setup(server)
  await server.listen({ host: '127.0.0.1', port: 0 })
  const address = server.server.address()
  const port = typeof address === 'object' && address !== null ? address.port : 0
  return { port, close: () => server.close() }
}

/** Resolves when the server closes the socket: how long it lived, and what it received. */
function closedAfter(socket: Socket): Promise<{ ms: number, received: string }> {
  const opened = performance.now()
  let received = ''
  socket.on('data', (chunk: Buffer) => { received += chunk.toString() })
  socket.on('error', () => undefined)
  return new Promise((resolve) => socket.once('close', () => { resolve({ ms: performance.now() - opened, received }) }))
}

const tls = (port: number): Promise<TLSSocket> => new Promise((resolve, reject) => {
  const socket = tlsConnect({ port, host: '127.0.0.1', ca, servername: 'localhost' }, () => { resolve(socket) })
  socket.once('error', reject)
})

/** One request on an open socket; resolves with the response once its body is complete. */
function exchange(socket: TLSSocket, head: string, body: string): Promise<string> {
  let text = ''
  return new Promise((resolve) => {
    const onData = (chunk: Buffer): void => {
      text += chunk.toString()
      const [headers, rest] = text.split('\r\n\r\n', 2)
      const length = Number(/content-length: (\d+)/i.exec(headers ?? '')?.[1] ?? Number.NaN)
      if (rest !== undefined && rest.length >= length) {
        socket.removeListener('data', onData)
        resolve(text)
      }
    }
    socket.on('data', onData)
    socket.write(`POST /validate HTTP/1.1\r\nHost: localhost\r\n${head}Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`)
  })
}

t.test('timeouts close connections that do not behave like kube-apiserver', async (t) => {
  const { port, close } = await listening(quick)
  t.teardown(close)

  const noHandshake = await closedAfter(tcpConnect(port, '127.0.0.1'))
  t.ok(noHandshake.ms >= 250 && noHandshake.ms < 2000, `no TLS handshake: closed after ${noHandshake.ms.toFixed(0)} ms (handshake timeout 300 ms)`)

  // Node counts a connection's first request from the moment it connects, so the headers timeout
  // also closes a connection that never sends anything (node_http_parser.cc, Parser::Initialize).
  const silent = await closedAfter(await tls(port))
  t.ok(silent.ms >= 150 && silent.ms < 500, `TLS and nothing sent: closed after ${silent.ms.toFixed(0)} ms (headers timeout 200 ms, request timeout 600 ms)`)

  const slowHeaders = await tls(port)
  const headersClosed = closedAfter(slowHeaders)
  slowHeaders.write('POST /validate HTTP/1.1\r\nHost: localhost\r\n')
  const headers = await headersClosed
  t.ok(headers.ms >= 150 && headers.ms < 500, `headers never finished: closed after ${headers.ms.toFixed(0)} ms (headers timeout 200 ms, request timeout 600 ms)`)
  t.match(headers.received, /^HTTP\/1\.1 408 /, 'with a 408')

  const slowBody = await tls(port)
  const bodyClosed = closedAfter(slowBody)
  slowBody.write('POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"apiVersion"')
  const drip = setInterval(() => { slowBody.write(' ') }, 100)
  const body = await bodyClosed
  clearInterval(drip)
  t.ok(body.ms >= 550 && body.ms < 2500, `body still arriving: closed after ${body.ms.toFixed(0)} ms (request timeout 600 ms)`)
  t.match(body.received, /^HTTP\/1\.1 408 /, 'with a 408')
})

t.test('a body without content-length is charged as it streams and refused when the budget runs out', async (t) => {
  const { port, close } = await listening({ ...quick, ...{ inFlightBytes: small.inFlightBytes, reservedBytes: small.reservedBytes, smallBodyBytes: small.smallBodyBytes, requestBytes: small.requestBytes } })
  t.teardown(close)
  const socket = await tls(port)
  const closed = closedAfter(socket)
  socket.write('POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n')
  let sent = 0
  const chunk = `${(16 * KiB).toString(16)}\r\n${'x'.repeat(16 * KiB)}\r\n`
  const drip = setInterval(() => {
    if (sent < 10 && !socket.destroyed) {
      socket.write(chunk)
      sent++
    }
  }, 20)
  const { received } = await closed
  clearInterval(drip)
  t.match(received, /^HTTP\/1\.1 429 /)
  t.match(received, /retry-after: 1\r\n/i)
  const held = Number(/\((\d+) bytes received\) \[SCG_OVERLOADED\]/.exec(received)?.[1])
  t.ok(held > 31 * KiB - 16 * KiB && held <= 31 * KiB + 16 * KiB, `refused once the large share (31 KiB) could not take the next piece (${held} bytes received)`)
  t.ok(sent < 10, `refused while the body was still arriving (${sent} of 10 chunks sent)`)
})

t.test('a kept-alive connection is closed when idle; a handler slower than the request timeout is still answered', async (t) => {
  const { port, close } = await listening(quick, (server) => {
    server.addHook('onSend', async (request) => {
      if (request.headers['x-slow'] !== undefined) await new Promise((resolve) => setTimeout(resolve, 800))
    })
  })
  t.teardown(close)
  const socket = await tls(port)
  const closed = closedAfter(socket)
  const answer = await exchange(socket, 'X-Slow: 1\r\n', review('slow'))
  const answeredAt = performance.now()
  t.match(answer, /^HTTP\/1\.1 200 /, 'answered after 800 ms of handling, past the 600 ms request timeout')
  t.match(answer, /"uid":"slow","allowed":true/)
  await closed
  const idle = performance.now() - answeredAt
  // Node adds a second to keepAliveTimeout before it closes (http.Server keepAliveTimeoutBuffer).
  t.ok(idle >= 350 && idle < 3500, `then closed after ${idle.toFixed(0)} ms idle (keep-alive timeout 400 ms)`)
})

t.test('connections beyond the limit are closed at once; the ones open keep working', async (t) => {
  const { port, close } = await listening({ ...quick, keepAliveTimeoutMs: 30_000 })
  t.teardown(close)
  const client = await tls(port)
  t.match(await exchange(client, '', review('first')), /^HTTP\/1\.1 200 /, 'a client connected before the limit is reached')
  const held = await Promise.all([tls(port), tls(port), tls(port)])
  const refused = await closedAfter(tcpConnect(port, '127.0.0.1'))
  t.ok(refused.ms < 250, `the fifth connection is closed at once (${refused.ms.toFixed(0)} ms)`)
  t.match(await exchange(client, '', review('again')), /^HTTP\/1\.1 200 /, 'the kept-alive client is still answered')
  for (const socket of held) socket.destroy()
  client.destroy()
  await new Promise((resolve) => setTimeout(resolve, 50))
  const fresh = await tls(port)
  t.ok(fresh.authorized, 'once they are gone, new connections are accepted')
  fresh.destroy()
})
