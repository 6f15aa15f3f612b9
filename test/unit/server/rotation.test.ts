// Certificate rotation under load: cert-manager rewrites the mounted Secret while the apiserver keeps
// calling. The real server (serve()) reloads the pair; no review may fail during the switch, new
// connections must see the new certificate, and a half-written pair must never be served.

import t from 'tap'
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { connect } from 'node:tls'
import { Agent, request } from 'undici'
import { serve } from '../../../src/server/serve.ts'
import { serveOptions } from '../../support/server.ts'

const dir = mkdtempSync(join(tmpdir(), 'scg-rotation-'))
t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })

const openssl = (...args: string[]): void => { execFileSync('openssl', args, { stdio: 'ignore' }) }

// One CA, three serving certificates signed by it, as a cert-manager Issuer would renew them.
openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=test-ca', '-keyout', join(dir, 'ca.key'), '-out', join(dir, 'ca.crt'))
writeFileSync(join(dir, 'san.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n')
const generations = [1, 2, 3].map((n) => {
  const key = join(dir, `leaf${n}.key`)
  const csr = join(dir, `leaf${n}.csr`)
  const cert = join(dir, `leaf${n}.crt`)
  openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-subj', `/CN=servicecidr-guard-${n}`, '-keyout', key, '-out', csr)
  openssl('x509', '-req', '-in', csr, '-CA', join(dir, 'ca.crt'), '-CAkey', join(dir, 'ca.key'), '-CAcreateserial', '-days', '1', '-extfile', join(dir, 'san.ext'), '-out', cert)
  return { cert: readFileSync(cert), key: readFileSync(key), subject: `CN=servicecidr-guard-${n}` }
})
const ca = readFileSync(join(dir, 'ca.crt'), 'utf8')

// The layout kubelet gives a Secret volume: files are symlinks into ..data, itself a symlink to a
// timestamped directory that is swapped atomically on update.
const volume = join(dir, 'tls')
mkdirSync(volume)
function publish(generation: number): void {
  const target = `..${generation}`
  mkdirSync(join(volume, target))
  writeFileSync(join(volume, target, 'tls.crt'), generations[generation - 1]!.cert)
  writeFileSync(join(volume, target, 'tls.key'), generations[generation - 1]!.key)
  symlinkSync(target, join(volume, '..data_tmp'))
  renameSync(join(volume, '..data_tmp'), join(volume, '..data'))
}
publish(1)
symlinkSync('..data/tls.crt', join(volume, 'tls.crt'))
symlinkSync('..data/tls.key', join(volume, 'tls.key'))

const policy = join(dir, 'policy.yaml')
writeFileSync(policy, 'apiVersion: servicecidr-guard/v1alpha1\nkind: Policy\nspec: {}\n')

// No apiserver here (serveOptions): metadata-only UPDATEs need no cluster state.

const body = JSON.stringify({
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  request: {
    uid: 'rotation',
    kind: { group: 'networking.k8s.io', version: 'v1', kind: 'ServiceCIDR' },
    name: 'extra',
    operation: 'UPDATE',
    userInfo: { username: 'system:serviceaccount:kube-system:service-cidr-controller' },
    object: { metadata: { name: 'extra', finalizers: ['networking.k8s.io/service-cidr-finalizer'] }, spec: { cidrs: ['34.118.224.0/24'] } },
    oldObject: { metadata: { name: 'extra' }, spec: { cidrs: ['34.118.224.0/24'] } },
  },
})

function peerSubject(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, ca, servername: 'localhost' }, () => {
      const subject = socket.getPeerCertificate().subject.CN
      socket.end()
      resolve(`CN=${String(subject)}`)
    })
    socket.on('error', reject)
  })
}

t.test('rotating the serving certificate under load fails no review', async (t) => {
  const running = await serve(serveOptions({ policyPath: policy, certPath: join(volume, 'tls.crt'), keyPath: join(volume, 'tls.key'), healthPort: undefined }))
  await running.listening
  const port = running.webhookAddress()!.port
  t.equal(await peerSubject(port), generations[0]!.subject, 'serves the first certificate')

  // Keep-alive clients, and clients that open a new connection (a new handshake) for every review.
  const keepAlive = new Agent({ connect: { ca, servername: 'localhost' }, connections: 4 })
  let answered = 0
  const failures: string[] = []
  let stop = false
  const client = async (fresh: boolean): Promise<void> => {
    while (!stop) {
      const agent = fresh ? new Agent({ connect: { ca, servername: 'localhost' }, pipelining: 0 }) : keepAlive
      try {
        const response = await request(`https://127.0.0.1:${port}/validate`, { method: 'POST', body, headers: { 'content-type': 'application/json' }, dispatcher: agent })
        const review = await response.body.json() as { response?: { allowed?: boolean } }
        if (response.statusCode !== 200 || review.response?.allowed !== true) failures.push(`status ${response.statusCode}`)
        else answered++
      } catch (error) {
        failures.push(error instanceof Error ? error.message : String(error))
      } finally {
        if (fresh) await agent.close()
      }
    }
  }
  const clients = [client(false), client(false), client(true), client(true)]

  const waitFor = async (subject: string): Promise<void> => {
    for (let i = 0; i < 100 && (await peerSubject(port)) !== subject; i++) await new Promise((resolve) => setTimeout(resolve, 50))
  }
  await new Promise((resolve) => setTimeout(resolve, 300))
  publish(2)
  await waitFor(generations[1]!.subject)
  t.equal(await peerSubject(port), generations[1]!.subject, 'new connections get the second certificate')

  // A non-atomic writer: the new certificate lands before its key. The mismatched pair is refused
  // and the server keeps serving the old one until the key arrives.
  writeFileSync(join(volume, '..2', 'tls.crt'), generations[2]!.cert)
  await new Promise((resolve) => setTimeout(resolve, 300))
  t.equal(await peerSubject(port), generations[1]!.subject, 'a half-written pair is not served')
  writeFileSync(join(volume, '..2', 'tls.key'), generations[2]!.key)
  await waitFor(generations[2]!.subject)
  t.equal(await peerSubject(port), generations[2]!.subject, 'the completed pair is served')

  await new Promise((resolve) => setTimeout(resolve, 300))
  stop = true
  await Promise.all(clients)
  await keepAlive.close()
  t.ok(answered > 50, `reviews answered during rotation (${answered})`)
  t.same(failures, [], 'no review failed')
  t.match(running.readiness().checks, { certificate: { loaded: true, subject: generations[2]!.subject, reloads: 2 } }, 'readiness reports the reloads')
  await running.shutdown('test')
})
