// The manifests pass server-side dry-run against the real kube-apiserver: every overlay
// (config/default and config/overlays/*, plus the gke overlay with the optional Prometheus and
// NetworkPolicy components)
// is built with `kubectl kustomize` and applied with --dry-run=server. Kinds whose CRDs the cluster
// does not serve (cert-manager's Certificate and Issuer, the Prometheus Operator's ServiceMonitor and
// PrometheusRule on the local control plane) cannot be dry-run there, and kubectl's client-side dry
// run needs their CRDs too: they are checked structurally instead, and the output says so.
//
// Also: the ValidatingWebhookConfiguration registered in the cluster is the one in config/webhook
// (rules, matchConditions, failurePolicy, ...), apart from clientConfig.

import { execFile } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { promisify } from 'node:util'
import t, { type Test } from 'tap'
import { dump, loadAll } from 'js-yaml'
import { isNotFound } from './lib/kube.ts'
import { repoRoot } from './lib/paths.ts'
import { begin, finish } from './lib/setup.ts'
import { poll } from './lib/wait.ts'

const run = promisify(execFile)
const context = await begin(t, import.meta.url, 'manifests')
const { cluster, harness, file } = context

interface Manifest {
  apiVersion: string
  kind: string
  metadata: { name: string, namespace?: string, labels?: Record<string, string>, annotations?: Record<string, string> }
  spec?: Record<string, unknown>
  [key: string]: unknown
}

const kubectl = (...args: string[]): Promise<{ stdout: string, stderr: string }> =>
  run(harness.kubectl, ['--kubeconfig', harness.kubeconfigPath, ...args], { maxBuffer: 16 * 1024 * 1024, timeout: 120_000 })

async function build(dir: string): Promise<Manifest[]> {
  const { stdout } = await kubectl('kustomize', dir)
  return (loadAll(stdout) as (Manifest | null)[]).filter((object) => typeof object?.kind === 'string') as Manifest[]
}

/**
 * The kustomizations to check: config/default, every overlay, and gke with each optional component
 * no overlay includes (Prometheus, the NetworkPolicy, the ValidatingAdmissionPolicy, the scheduled
 * policy reports), written to a scratch directory.
 */
function kustomizations(scratch: string): { name: string, dir: string }[] {
  const overlays = readdirSync(join(repoRoot, 'config/overlays'), { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => ({ name: `config/overlays/${entry.name}`, dir: join(repoRoot, 'config/overlays', entry.name) }))
  const withComponent = (component: string): { name: string, dir: string } => {
    const dir = join(scratch, `gke-${component.replaceAll('/', '-')}`)
    mkdirSync(dir, { recursive: true })
    // kustomize takes only relative paths to other kustomizations.
    const up = relative(dir, repoRoot)
    writeFileSync(join(dir, 'kustomization.yaml'), dump({
      apiVersion: 'kustomize.config.k8s.io/v1beta1',
      kind: 'Kustomization',
      resources: [join(up, 'config/overlays/gke')],
      components: [join(up, 'config', component)],
    }))
    return { name: `config/overlays/gke + config/${component}`, dir }
  }
  return [
    { name: 'config/default', dir: join(repoRoot, 'config/default') },
    ...overlays,
    withComponent('prometheus'),
    withComponent('network-policy'),
    withComponent('vap/gke'),
    withComponent('policy-reports'),
  ]
}

/** Which group/version/kinds the cluster serves, from discovery. */
async function servedKinds(): Promise<Set<string>> {
  const served = new Set<string>()
  const core = await cluster.rawJSON('GET', '/api/v1')
  for (const resource of (core.body as { resources: { kind: string }[] }).resources) served.add(`v1/${resource.kind}`)
  const groups = await cluster.rawJSON('GET', '/apis')
  for (const group of (groups.body as { groups: { versions: { groupVersion: string }[] }[] }).groups) {
    for (const { groupVersion } of group.versions) {
      const list = await cluster.rawJSON('GET', `/apis/${groupVersion}`)
      if (list.status !== 200) continue
      for (const resource of (list.body as { resources: { kind: string }[] }).resources) served.add(`${groupVersion}/${resource.kind}`)
    }
  }
  return served
}

const get = (object: unknown, ...path: string[]): unknown => path.reduce<unknown>((value, key) => (value !== null && typeof value === 'object' ? (value as Record<string, unknown>)[key] : undefined), object)

const text = (value: unknown): string => (typeof value === 'string' || typeof value === 'number' ? String(value) : '')

/** What cert-manager and the Prometheus Operator would need of their objects, checked without their CRDs. */
function checkStructure(t: Test, object: Manifest, all: readonly Manifest[]): void {
  const id = `${object.kind} ${object.metadata.namespace ?? ''}/${object.metadata.name}`
  const sameNamespace = (kind: string, name: unknown): Manifest | undefined =>
    all.find((other) => other.kind === kind && other.metadata.name === name && other.metadata.namespace === object.metadata.namespace)
  switch (object.kind) {
    case 'Certificate': {
      t.equal(object.apiVersion, 'cert-manager.io/v1', `${id}: cert-manager.io/v1`)
      t.ok(get(object, 'spec', 'secretName'), `${id}: spec.secretName is set`)
      const issuer = text(get(object, 'spec', 'issuerRef', 'name'))
      const issuerKind = text(get(object, 'spec', 'issuerRef', 'kind')) || 'Issuer'
      t.ok(issuerKind === 'ClusterIssuer' || sameNamespace('Issuer', issuer), `${id}: its issuer ${issuerKind} ${issuer} is in the same build`)
      const dnsNames = get(object, 'spec', 'dnsNames')
      if (Array.isArray(dnsNames)) {
        const services = all.filter((other) => other.kind === 'Service').map((service) => `${service.metadata.name}.${service.metadata.namespace ?? ''}.svc`)
        t.ok(dnsNames.some((name) => services.includes(String(name))), `${id}: dnsNames name a Service of the build (${dnsNames.join(', ')})`)
      }
      break
    }
    case 'Issuer': {
      t.equal(object.apiVersion, 'cert-manager.io/v1', `${id}: cert-manager.io/v1`)
      const types = Object.keys(object.spec ?? {}).filter((key) => ['selfSigned', 'ca', 'acme', 'vault', 'venafi'].includes(key))
      t.equal(types.length, 1, `${id}: exactly one issuer type (${types.join(', ')})`)
      const caSecret = text(get(object, 'spec', 'ca', 'secretName'))
      if (caSecret !== '') {
        t.ok(all.some((other) => other.kind === 'Certificate' && get(other, 'spec', 'secretName') === caSecret && get(other, 'spec', 'isCA') === true), `${id}: its CA secret ${caSecret} comes from a CA Certificate of the build`)
      }
      break
    }
    case 'ServiceMonitor': {
      t.equal(object.apiVersion, 'monitoring.coreos.com/v1', `${id}: monitoring.coreos.com/v1`)
      const match = (get(object, 'spec', 'selector', 'matchLabels') ?? {}) as Record<string, string>
      const service = all.find((other) => other.kind === 'Service' && Object.entries(match).every(([key, value]) => other.metadata.labels?.[key] === value))
      t.ok(service, `${id}: selects a Service of the build (${JSON.stringify(match)})`)
      const ports = ((get(service, 'spec', 'ports') ?? []) as { name?: string }[]).map((port) => port.name)
      const endpoints = (get(object, 'spec', 'endpoints') ?? []) as { port?: string }[]
      t.ok(endpoints.length > 0 && endpoints.every((endpoint) => ports.includes(endpoint.port)), `${id}: every endpoint port is a port of that Service (${ports.join(', ')})`)
      break
    }
    case 'PrometheusRule': {
      t.equal(object.apiVersion, 'monitoring.coreos.com/v1', `${id}: monitoring.coreos.com/v1`)
      const groups = (get(object, 'spec', 'groups') ?? []) as { name?: string, rules?: { alert?: string, record?: string, expr?: unknown }[] }[]
      t.ok(groups.length > 0, `${id}: has rule groups`)
      const rules = groups.flatMap((group) => group.rules ?? [])
      t.ok(rules.length > 0 && rules.every((rule) => (rule.alert ?? rule.record) !== undefined && text(rule.expr).trim() !== ''), `${id}: every rule has a name (alert or record) and an expression`)
      break
    }
    default:
      t.fail(`${id}: no structural check for this kind; serve its CRD or add a check`)
  }
}

const scratch = mkdtempSync(join(tmpdir(), 'scg-e2e-manifests-'))
t.teardown(() => {
  rmSync(scratch, { recursive: true, force: true })
})
let served = new Set<string>()
const createdNamespaces: string[] = []
const builds: { name: string, objects: Manifest[] }[] = []

await file.spec('every kustomization builds; its namespaces exist for the dry run', async (t) => {
  served = await servedKinds()
  for (const entry of kustomizations(scratch)) {
    const objects = await build(entry.dir)
    t.ok(objects.length > 0, `${entry.name}: ${String(objects.length)} objects (${[...new Set(objects.map((object) => object.kind))].join(', ')})`)
    builds.push({ name: entry.name, objects })
  }
  // Server-side dry run of a namespaced object needs its namespace to exist.
  const namespaces = new Set(builds.flatMap(({ objects }) => objects.filter((object) => object.kind === 'Namespace').map((object) => object.metadata.name)))
  for (const name of namespaces) {
    try {
      await cluster.core.readNamespace({ name })
      t.comment(`namespace ${name} exists already; it is left alone`)
    } catch (error) {
      if (!isNotFound(error)) throw error
      await cluster.core.createNamespace({ body: { metadata: { name, labels: { 'e2e.servicecidr-guard.dev/spec': context.spec } } } })
      createdNamespaces.push(name)
      t.pass(`namespace ${name} created for the dry run`)
    }
  }
})

await file.spec('each build passes server-side dry-run; CRD kinds the cluster lacks pass structural checks', async (t) => {
  for (const { name, objects } of builds) {
    const serverSide = objects.filter((object) => served.has(`${object.apiVersion}/${object.kind}`))
    const structural = objects.filter((object) => !served.has(`${object.apiVersion}/${object.kind}`))
    const path = join(scratch, `${name.replace(/[^a-z0-9]+/gi, '-')}.yaml`)
    writeFileSync(path, serverSide.map((object) => dump(object)).join('---\n'))
    const { stdout } = await kubectl('apply', '--dry-run=server', '-o', 'name', '-f', path)
    const applied = stdout.trim().split('\n').filter((line) => line !== '')
    t.equal(applied.length, serverSide.length, `${name}: kube-apiserver accepted all ${String(serverSide.length)} objects in a server-side dry run (${[...new Set(serverSide.map((object) => object.kind))].join(', ')})`)
    if (structural.length > 0) {
      t.comment(`${name}: no CRD in this cluster for ${structural.map((object) => `${object.kind} ${object.metadata.name}`).join(', ')}: ` +
        'not dry-run on the server (kubectl\'s client-side dry run needs the CRDs as well); checked structurally instead')
      for (const object of structural) checkStructure(t, object, objects)
    }
    const webhook = objects.find((object) => object.kind === 'ValidatingWebhookConfiguration')
    const inject = webhook?.metadata.annotations?.['cert-manager.io/inject-ca-from']
    if (inject !== undefined) {
      const [namespace, certificate] = inject.split('/')
      t.ok(objects.some((object) => object.kind === 'Certificate' && object.metadata.namespace === namespace && object.metadata.name === certificate), `${name}: cert-manager.io/inject-ca-from names a Certificate of the build (${inject})`)
    }
  }
})

await file.spec('the registered ValidatingWebhookConfiguration is the one in config/webhook, apart from clientConfig', async (t) => {
  const [manifest] = (await build(join(repoRoot, 'config/webhook'))).filter((object) => object.kind === 'ValidatingWebhookConfiguration')
  if (manifest === undefined) throw new Error('config/webhook holds no ValidatingWebhookConfiguration')
  const live = await cluster.rawJSON('GET', `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${manifest.metadata.name}`)
  t.equal(live.status, 200, `ValidatingWebhookConfiguration ${manifest.metadata.name} is registered`)
  const liveHooks = (live.body as { webhooks?: Record<string, unknown>[] }).webhooks ?? []
  const wanted = (manifest['webhooks'] ?? []) as Record<string, unknown>[]
  t.equal(liveHooks.length, wanted.length, `${String(wanted.length)} webhook(s), as in config/webhook`)
  for (const hook of wanted) {
    const found = liveHooks.find((entry) => entry['name'] === hook['name'])
    t.ok(found, `webhook ${String(hook['name'])} is registered`)
    for (const [key, value] of Object.entries(hook)) {
      if (key === 'clientConfig') continue
      t.same(found?.[key], value, `${String(hook['name'])}: ${key} as in config/webhook`)
    }
    t.ok(get(found, 'clientConfig', 'caBundle'), 'clientConfig carries a caBundle')
  }
})

await file.spec('clean up: the namespaces created for the dry run are gone', async (t) => {
  for (const name of createdNamespaces) {
    await cluster.core.deleteNamespace({ name })
    // Nothing was created in it (only dry runs). Without a namespace controller (the local control
    // plane runs only the service-cidr-controller) nobody would remove its "kubernetes" finalizer, so
    // the suite finalizes the empty namespace itself, as the namespace controller would.
    const gone = await poll(`namespace ${name} to be deleted`, async () => isNotFound(await cluster.core.readNamespace({ name }).then(() => undefined, (error: unknown) => error)), { timeoutMs: 10_000 }).catch(() => false)
    if (!gone) {
      const finalized = await cluster.rawJSON('PUT', `/api/v1/namespaces/${name}/finalize`, { body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name }, spec: { finalizers: [] } } })
      t.equal(finalized.status, 200, `namespace ${name} finalized (no namespace controller in this cluster)`)
      await poll(`namespace ${name} to be deleted`, async () => isNotFound(await cluster.core.readNamespace({ name }).then(() => undefined, (error: unknown) => error)), { timeoutMs: 30_000 })
    }
    t.pass(`namespace ${name} is gone`)
  }
  // Checked by the label it was created with, whether this run had to create any namespace or not.
  const left = await cluster.core.listNamespace({ labelSelector: `e2e.servicecidr-guard.dev/spec=${context.spec}` })
  t.same(left.items.map((namespace) => namespace.metadata?.name), [], 'no namespace this file created is left')
})

await finish(context)
