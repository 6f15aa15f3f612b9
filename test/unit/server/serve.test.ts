// The assembled server: policy hot reload (keeping the last good policy), the health listener, and
// a graceful shutdown that lets an in-flight review finish.

import t from 'tap'
import { execFile, execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { connect } from 'node:tls'
import { request } from 'undici'
import { reviewStaleAfterMs, serve, type RunningServer } from '../../../src/server/serve.ts'
import { serveOptions } from '../../support/server.ts'

const dir = mkdtempSync(join(tmpdir(), 'scg-serve-'))
t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=localhost',
  '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1', '-keyout', join(dir, 'tls.key'), '-out', join(dir, 'tls.crt')], { stdio: 'ignore' })
const ca = readFileSync(join(dir, 'tls.crt'), 'utf8')

const policy = (enforcement: string): string => `apiVersion: servicecidr-guard/v1alpha1
kind: Policy
spec:
  allowedRanges: [34.118.224.0/20]
  enforcement: ${enforcement}
`

/**
 * Replaces a watched file whole, as a volume update does: a write in place can be read half done,
 * and counted as one more refused file.
 */
function replaceFile(path: string, content: string): void {
  writeFileSync(`${path}.tmp`, content)
  renameSync(`${path}.tmp`, path)
}

async function start(policyPath: string, shutdownDelayMs = 0): Promise<RunningServer> {
  const running = await serve(serveOptions({ policyPath, certPath: join(dir, 'tls.crt'), keyPath: join(dir, 'tls.key'), shutdownDelayMs }))
  await running.listening
  return running
}

/** A CREATE outside the allowed ranges. The cache has no apiserver, so only state-free rules decide. */
const createOutside = JSON.stringify({
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  request: {
    uid: 'u1',
    kind: { group: 'networking.k8s.io', version: 'v1', kind: 'ServiceCIDR' },
    name: 'outside',
    operation: 'CREATE',
    userInfo: { username: 'alice' },
    object: { metadata: { name: 'outside' }, spec: { cidrs: ['10.100.0.0/24'] } },
  },
})

async function post(port: number): Promise<{ allowed: boolean, warnings?: string[], status?: { message: string } }> {
  const response = await request(`https://127.0.0.1:${port}/validate`, {
    method: 'POST',
    body: createOutside,
    headers: { 'content-type': 'application/json' },
    dispatcher: new (await import('undici')).Agent({ connect: { ca, servername: 'localhost' } }),
  })
  return ((await response.body.json()) as { response: { allowed: boolean } }).response
}

const wait = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

t.test('a refused policy file leaves the last good policy in force, and says so', async (t) => {
  const policyPath = join(dir, 'policy.yaml')
  writeFileSync(policyPath, policy('Deny'))
  const running = await start(policyPath)
  t.teardown(() => running.shutdown('test'))
  const port = running.webhookAddress()!.port
  const health = running.healthAddress()!.port

  t.equal((await post(port)).allowed, false, 'Deny: refused')

  replaceFile(policyPath, policy('Sometimes'))
  await wait(300)
  t.match(running.readiness().checks, { policy: { valid: false, lastError: /spec.enforcement: must be one of "Deny", "Warn", "Audit"/ } })
  t.equal((await post(port)).allowed, false, 'still Deny after a bad file')
  const metrics = await (await request(`http://127.0.0.1:${health}/metrics`)).body.text()
  t.match(metrics, 'servicecidr_guard_policy_valid 0')
  t.match(metrics, 'servicecidr_guard_policy_reload_errors_total 1')

  replaceFile(policyPath, policy('Warn'))
  await wait(300)
  t.match(running.readiness().checks, { policy: { valid: true } })
  const warned = await post(port)
  t.equal(warned.allowed, true, 'Warn: allowed')
  t.match(warned.warnings, [/outside the allowed IPv4 ranges/])
  const after = await (await request(`http://127.0.0.1:${health}/metrics`)).body.text()
  t.match(after, 'servicecidr_guard_policy_valid 1')
  t.match(after, 'servicecidr_guard_policy_reloads_total 1')
})

// A volume update can leave the file unreadable for a poll; once it reads again as the policy in
// force, the error is over, and nothing was reloaded (the counter and the log said "reloaded").
t.test('a policy file unreadable for a while, then the same again: valid, and no reload counted', async (t) => {
  const policyPath = join(dir, 'policy-gone.yaml')
  writeFileSync(policyPath, policy('Deny'))
  const running = await start(policyPath)
  t.teardown(() => running.shutdown('test'))
  const health = running.healthAddress()!.port
  const metrics = async (): Promise<string> => (await request(`http://127.0.0.1:${health}/metrics`)).body.text()

  rmSync(policyPath)
  await wait(300)
  t.match(running.readiness().checks, { policy: { valid: false, lastError: /cannot read .*policy-gone\.yaml/ } })
  const gone = await metrics()
  t.match(gone, 'servicecidr_guard_policy_valid 0')
  t.match(gone, 'servicecidr_guard_policy_reload_errors_total 1', 'one refusal for a file gone, not one a poll')

  replaceFile(policyPath, policy('Deny'))
  await wait(300)
  t.match(running.readiness().checks, { policy: { valid: true } })
  const after = await metrics()
  t.match(after, 'servicecidr_guard_policy_valid 1')
  t.match(after, 'servicecidr_guard_policy_reloads_total 0')

  // A refused file, then the policy in force again: the same.
  replaceFile(policyPath, policy('Sometimes'))
  await wait(300)
  t.match(running.readiness().checks, { policy: { valid: false } })
  replaceFile(policyPath, policy('Deny'))
  await wait(300)
  t.match(running.readiness().checks, { policy: { valid: true } })
  t.match(await metrics(), 'servicecidr_guard_policy_reloads_total 0')
  t.equal((await post(running.webhookAddress()!.port)).allowed, false, 'still Deny')
})

t.test('an invalid policy at start is refused with every problem', async (t) => {
  const policyPath = join(dir, 'bad.yaml')
  writeFileSync(policyPath, 'apiVersion: servicecidr-guard/v1alpha1\nkind: Policy\nspec:\n  allowedRanges: [10.0.0.1/24]\n  overlap: Sometimes\n')
  await t.rejects(start(policyPath), /spec.overlap: must be one of[\s\S]*spec.allowedRanges\[0\]: "10.0.0.1\/24" is not a canonical CIDR/)
})

t.test('health listener: live at once, not ready without a synced cache', async (t) => {
  const policyPath = join(dir, 'policy2.yaml')
  writeFileSync(policyPath, policy('Deny'))
  const running = await start(policyPath)
  t.teardown(() => running.shutdown('test'))
  const health = running.healthAddress()!.port
  t.equal((await request(`http://127.0.0.1:${health}/livez`)).statusCode, 200)
  const ready = await request(`http://127.0.0.1:${health}/readyz`)
  t.equal(ready.statusCode, 503)
  t.match(await ready.body.json(), { ready: false, checks: { certificate: { loaded: true }, webhook: { listening: true }, cache: { state: /Discovering|Syncing/ } } })
})

t.test('shutdown lets an in-flight review finish', async (t) => {
  const policyPath = join(dir, 'policy3.yaml')
  writeFileSync(policyPath, policy('Deny'))
  const running = await start(policyPath, 100)
  const port = running.webhookAddress()!.port
  const socket = connect({ host: '127.0.0.1', port, ca, servername: 'localhost' })
  await new Promise((resolve) => socket.once('secureConnect', resolve))
  let response = ''
  socket.on('data', (chunk: Buffer) => { response += chunk.toString() })
  const half = Math.floor(createOutside.length / 2)
  socket.write(`POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(createOutside)}\r\n\r\n${createOutside.slice(0, half)}`)
  await wait(50)
  const stopped = running.shutdown('SIGTERM')
  await wait(50)
  t.equal(running.readiness().ready, false, 'not ready while draining')
  socket.write(createOutside.slice(half))
  await stopped
  await new Promise((resolve) => { if (socket.closed) resolve(undefined); else socket.once('close', resolve) })
  t.match(response, /^HTTP\/1.1 200 OK/, 'the in-flight review was answered')
  t.match(response, /"uid":"u1","allowed":false/)
})

t.test('a request still arriving when the shutdown timeout ends is cut off, not waited for', async (t) => {
  const policyPath = join(dir, 'policy5.yaml')
  writeFileSync(policyPath, policy('Deny'))
  const running = await serve(serveOptions({ policyPath, certPath: join(dir, 'tls.crt'), keyPath: join(dir, 'tls.key'), shutdownTimeoutMs: 200 }))
  await running.listening
  const socket = connect({ host: '127.0.0.1', port: running.webhookAddress()!.port, ca, servername: 'localhost' })
  await new Promise((resolve) => socket.once('secureConnect', resolve))
  socket.on('error', () => undefined)
  t.teardown(() => { socket.destroy() })
  // A body sent a byte at a time: never idle, and past the request timeout only if it is checked.
  socket.write('POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{')
  const trickle = setInterval(() => { socket.write(' ') }, 50)
  const closed = new Promise<boolean>((resolve) => socket.once('close', () => { resolve(true) }))
  t.teardown(() => { clearInterval(trickle) })
  await running.shutdown('SIGTERM')
  t.ok(await Promise.race([closed, wait(2000).then(() => false)]), 'the connection is closed once the shutdown timeout has passed')
})

t.test('after shutdown nothing of the server keeps the process alive', async (t) => {
  const policyPath = join(dir, 'policy4.yaml')
  writeFileSync(policyPath, policy('Deny'))
  // A process that starts a server with a long shutdown timeout, shuts it down and then has nothing
  // left to do: it must exit at once, not when the unused timeout would have expired.
  const script = `
    import { serve } from ${JSON.stringify(join(import.meta.dirname, '../../../src/server/serve.ts'))}
    import { serveOptions } from ${JSON.stringify(join(import.meta.dirname, '../../support/server.ts'))}
    const running = await serve(serveOptions({ policyPath: ${JSON.stringify(policyPath)}, certPath: ${JSON.stringify(join(dir, 'tls.crt'))}, keyPath: ${JSON.stringify(join(dir, 'tls.key'))}, shutdownTimeoutMs: 60_000 }))
    await running.listening
    await running.shutdown('test')
  `
  const started = Date.now()
  const error = await new Promise<Error | null>((resolve) => {
    execFile(process.execPath, ['--input-type=module', '-e', script], { cwd: join(import.meta.dirname, '../../..'), timeout: 30_000 }, resolve)
  })
  t.error(error, 'the process ran and exited by itself')
  const seconds = (Date.now() - started) / 1000
  t.ok(seconds < 15, `the process exited ${seconds.toFixed(1)} s after starting, well before the 60 s shutdown timeout`)
})

t.test('reviewStaleAfterMs: how long reviews trust a view without a watch is the margin a reservation keeps past the webhook timeouts', (t) => {
  t.equal(reviewStaleAfterMs(10_000, 30_000), 5000, 'the defaults: a 10 s TTL is the webhook\'s 5 s timeout and a 5 s margin')
  t.equal(reviewStaleAfterMs(35_000, 30_000), 5000, 'a TTL raised for a slower webhook (30 s) keeps the same margin')
  t.equal(reviewStaleAfterMs(8000, 30_000), 3000, 'a shorter TTL, a shorter margin')
  t.equal(reviewStaleAfterMs(4000, 30_000), 0, 'none left: only a view whose watch is open')
  t.equal(reviewStaleAfterMs(10_000, 2000), 2000, 'never longer than staleAfterMs')
  t.end()
})

// A Secret volume update can leave the key unreadable for a poll: the same pair read again is no
// rotation (the counter, readiness and the log said one happened), and one error is counted.
t.test('the serving key unreadable for a while, then the same again: no reload counted, one error', async (t) => {
  const policyPath = join(dir, 'policy-cert.yaml')
  writeFileSync(policyPath, policy('Deny'))
  const running = await start(policyPath)
  t.teardown(() => running.shutdown('test'))
  const metrics = async (): Promise<string> => (await request(`http://127.0.0.1:${running.healthAddress()!.port}/metrics`)).body.text()
  const keyPath = join(dir, 'tls.key')
  const key = readFileSync(keyPath)
  renameSync(keyPath, `${keyPath}.away`)
  await wait(300)
  renameSync(`${keyPath}.away`, keyPath)
  await wait(300)
  const after = await metrics()
  t.match(after, 'servicecidr_guard_certificate_reloads_total 0')
  t.match(after, 'servicecidr_guard_certificate_errors_total 1')
  t.match(running.readiness().checks, { certificate: { loaded: true, reloads: 0 } })
  t.same(readFileSync(keyPath), key)
  t.equal((await post(running.webhookAddress()!.port)).allowed, false, 'still serving')
})
