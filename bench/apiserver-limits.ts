// What a real kube-apiserver sends a ServiceCIDR webhook at the limits, and what it does with our
// refusals: the measurements behind maxReviewBytes (src/admission/review.ts) and the "Limits"
// section of docs/deploy.md. Needs the local control plane (hack/local/up.sh, WEBHOOK=0); registers
// a capturing webhook of its own on loopback and removes it, and everything it created, at the end.
//
//   node bench/apiserver-limits.ts
//
// 1. The largest review: a ServiceCIDR with 256 KiB of annotations (the API's limit) made of '<'
//    (which Go's JSON encoder writes as \u003c, six bytes) and as many labels as etcd accepts, found
//    by bisection; then an UPDATE adding a second CIDR, which carries object and oldObject.
// 2. Refusals: the webhook answers 429 with Retry-After: 1, then 413, then drops the connection;
//    printed is how often the apiserver called and what the user was told.
//
// Environment: LOCAL_DIR (default .local), BENCH_PORT (the capturing webhook's port; default: free).

import { readFileSync } from 'node:fs'
import { createServer } from 'node:https'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Agent, request } from 'undici'
import { maxReviewBytes } from '../src/admission/review.ts'
import { freePort, mib, repo, selfSignedCertificate } from './replica.ts'

const local = process.env['LOCAL_DIR'] ?? join(repo, '.local')
const env = Object.fromEntries(readFileSync(join(local, 'env'), 'utf8').split('\n').filter((line) => line.includes('=')).map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]))
const apiserver = env['APISERVER_URL'] ?? ''
const dispatcher = new Agent({ connect: { ca: readFileSync(join(local, 'pki/ca.crt')), cert: readFileSync(join(local, 'pki/admin.crt')), key: readFileSync(join(local, 'pki/admin.key')) } })

async function api(method: string, path: string, body?: unknown, contentType = 'application/json', accept = 'application/json'): Promise<{ status: number, text: string, bytes: number }> {
  const response = await request(`${apiserver}${path}`, {
    method: method as 'GET',
    dispatcher,
    headers: { 'content-type': contentType, accept },
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  })
  const buffer = Buffer.from(await response.body.arrayBuffer())
  return { status: response.statusCode, text: buffer.toString('utf8'), bytes: buffer.length }
}

// --- A capturing webhook ------------------------------------------------------------------------

type Answer = 'allow' | '429' | '413' | 'drop'
const work = mkdtempSync(join(tmpdir(), 'scg-apiserver-limits-'))
const tls = selfSignedCertificate(work)
let answer: Answer = 'allow'
const seen: { operation: string, name: string, bytes: number }[] = []
const webhook = createServer({ cert: readFileSync(tls.cert), key: readFileSync(tls.key) }, (req, res) => {
  const chunks: Buffer[] = []
  req.on('data', (chunk: Buffer) => chunks.push(chunk))
  req.on('end', () => {
    const body = Buffer.concat(chunks)
    const review = JSON.parse(body.toString()) as { request: { uid: string, operation: string, name: string } }
    seen.push({ operation: review.request.operation, name: review.request.name, bytes: body.length })
    const reply = (status: number, headers: Record<string, string>, response: object): void => {
      res.writeHead(status, { 'content-type': 'application/json', ...headers })
      res.end(JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: review.request.uid, ...response } }))
    }
    if (answer === 'allow') reply(200, {}, { allowed: true })
    else if (answer === '429') reply(429, { 'retry-after': '1', connection: 'close' }, { allowed: false, status: { code: 429, reason: 'TooManyRequests', message: 'over budget [SCG_OVERLOADED]' } })
    else if (answer === '413') reply(413, { connection: 'close' }, { allowed: false, status: { code: 413, reason: 'RequestEntityTooLarge', message: 'too large [SCG_BODY_TOO_LARGE]' } })
    else req.socket.destroy()
  })
})
const port = await freePort(0)
await new Promise<void>((resolve) => webhook.listen(port, '127.0.0.1', resolve))

const configuration = {
  apiVersion: 'admissionregistration.k8s.io/v1',
  kind: 'ValidatingWebhookConfiguration',
  metadata: { name: 'scg-apiserver-limits' },
  webhooks: [{
    name: 'capture.servicecidr-guard.dev',
    admissionReviewVersions: ['v1'],
    sideEffects: 'None',
    failurePolicy: 'Fail',
    timeoutSeconds: 5,
    rules: [{ apiGroups: ['networking.k8s.io'], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE', 'DELETE'], resources: ['servicecidrs'], scope: 'Cluster' }],
    // Those of config/webhook/manifests.yaml.
    matchConditions: [
      { name: 'skip-apiserver-default-servicecidr', expression: "!(request.userInfo.username == 'system:apiserver' && request.name == 'kubernetes')" },
      { name: 'skip-metadata-only-updates', expression: "request.operation != 'UPDATE' || object.spec != oldObject.spec" },
    ],
    clientConfig: { url: `https://127.0.0.1:${port}/validate`, caBundle: Buffer.from(tls.ca).toString('base64') },
  }],
}

const names: string[] = []
const path = '/apis/networking.k8s.io/v1/servicecidrs'
const annotations = { 'example.com/text': '<'.repeat(256 * 1024 - 'example.com/text'.length) }
function serviceCIDR(name: string, labels: number): object {
  const prefix = 'a-long-label-prefix-to-make-each-label-as-large-as-the-api-allows.example.com'
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'ServiceCIDR',
    metadata: {
      name,
      annotations,
      labels: Object.fromEntries(Array.from({ length: labels }, (_, i) => [`${prefix}/label-${String(i).padStart(6, '0')}-${'k'.repeat(45)}`, 'v'.repeat(63)])),
    },
    spec: { cidrs: ['172.30.0.0/24'] },
  }
}

try {
  const created = await api('POST', '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations', configuration)
  if (created.status !== 201) throw new Error(`registering the capturing webhook: ${created.status} ${created.text}`)
  // The apiserver picks up a new webhook configuration within a second or so.
  for (let i = 0; i < 50; i++) {
    const probe = await api('POST', `${path}?dryRun=All`, { apiVersion: 'networking.k8s.io/v1', kind: 'ServiceCIDR', metadata: { name: 'probe' }, spec: { cidrs: ['172.31.0.0/24'] } })
    if (probe.status === 201 && seen.length > 0) break
    await new Promise((resolve) => setTimeout(resolve, 200))
  }

  // 1. The largest review.
  let low = 0
  let high = 8000
  let best = ''
  while (low < high) {
    const labels = Math.ceil((low + high) / 2)
    const name = `largest-${labels}`
    const response = await api('POST', path, serviceCIDR(name, labels))
    if (response.status === 201) {
      names.push(name)
      low = labels
      best = name
    } else {
      if (!/too large|exceeded|request entity/i.test(response.text)) throw new Error(`unexpected refusal: ${response.status} ${response.text.slice(0, 300)}`)
      high = labels - 1
    }
  }
  const stored = await api('GET', `${path}/${best}`, undefined, 'application/json', 'application/vnd.kubernetes.protobuf')
  const asJSON = await api('GET', `${path}/${best}`)
  const create = seen.filter((review) => review.operation === 'CREATE' && review.name === best).at(-1)
  const updated = await api('PATCH', `${path}/${best}`, { spec: { cidrs: ['172.30.0.0/24', 'fd00:30::/64'] } }, 'application/merge-patch+json')
  const update = seen.filter((review) => review.operation === 'UPDATE' && review.name === best).at(-1)
  console.log(`largest ServiceCIDR etcd accepted: ${low} labels and 256 KiB of annotations; stored ${mib(stored.bytes)} MiB as protobuf, ${mib(asJSON.bytes)} MiB as JSON`)
  console.log(`  CREATE review: ${mib(create?.bytes ?? Number.NaN)} MiB; UPDATE adding a CIDR (${updated.status}): ${mib(update?.bytes ?? Number.NaN)} MiB, with object and oldObject`)
  console.log(`  maxReviewBytes: ${mib(maxReviewBytes)} MiB, ${((update?.bytes ?? 0) / maxReviewBytes * 100).toFixed(0)}% used by the largest UPDATE`)

  // 2. Refusals.
  for (const kind of ['429', '413', 'drop'] as const) {
    answer = kind
    const before = seen.length
    const started = performance.now()
    const response = await api('POST', path, { apiVersion: 'networking.k8s.io/v1', kind: 'ServiceCIDR', metadata: { name: `refused-${kind}` }, spec: { cidrs: ['172.29.0.0/24'] } })
    const message = (JSON.parse(response.text) as { message?: string }).message ?? response.text
    console.log(`webhook answers ${kind === 'drop' ? 'by closing the connection' : kind}: the apiserver called ${seen.length - before} time(s) in ${((performance.now() - started) / 1000).toFixed(1)} s, then answered the user ${response.status}: ${message}`)
  }
} finally {
  answer = 'allow'
  await api('DELETE', '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/scg-apiserver-limits')
  for (const name of names) await api('DELETE', `${path}/${name}`)
  webhook.close()
  await dispatcher.close()
  rmSync(work, { recursive: true, force: true })
}
