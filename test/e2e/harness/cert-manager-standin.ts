// THE STAND-IN FOR CERT-MANAGER in the offline kind run (hack/kind/e2e.sh, KIND_MODE=local). On
// machines that reach no container registry cert-manager's controllers cannot run (their images
// cannot be pulled, and their modules are not served by the Go proxy). Its CRDs are installed from
// its Go module, so the Issuers and Certificates of config/certmanager pass the apiserver's real
// validation; this script then does, once, what cert-manager's controllers would do with them:
//
// 1. issues every Certificate in the cluster from its Issuer, in dependency order (a CA Issuer's
//    Secret comes from another Certificate): `selfSigned` signs with the Certificate's own key, `ca`
//    with the key in the Issuer's Secret. The Secret is named by spec.secretName, of type
//    kubernetes.io/tls, with tls.crt, tls.key and ca.crt as cert-manager writes them (leaf in
//    tls.crt, the CA's certificate in ca.crt; for a self-signed certificate, itself), for the
//    Certificate's commonName, dnsNames, ipAddresses, usages, isCA, duration and private key
//    (ECDSA or RSA, size, PKCS1 or PKCS8 encoding), with cert-manager's annotations on it;
//    then sets the Certificate's Ready condition, its message naming this stand-in;
// 2. injects the CA (ca.crt of the Certificate's Secret) into clientConfig.caBundle of every webhook
//    of each Validating- or MutatingWebhookConfiguration annotated cert-manager.io/inject-ca-from:
//    <namespace>/<certificate>, as cert-manager's cainjector does.
//
// A Secret already issued for the same Certificate and still valid is kept, so running it again
// changes nothing. It renews nothing later: the suite runs for minutes, the certificates last days.
// Issuer types other than selfSigned and ca (ACME, Vault, ...) are refused with an error.
//
//   node test/e2e/harness/cert-manager-standin.ts        (KUBECONFIG names the cluster)
//
// Needs: openssl (the certificates are made with it, as hack/local/up.sh does).

import { execFile } from 'node:child_process'
import { randomBytes, X509Certificate } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { Cluster } from '../lib/kube.ts'

const run = promisify(execFile)
const standIn = 'cert-manager stand-in of the offline kind e2e run (test/e2e/harness/cert-manager-standin.ts)'

interface ObjectMeta {
  name: string
  namespace?: string
  annotations?: Record<string, string>
}

interface Certificate {
  metadata: ObjectMeta
  spec: {
    secretName: string
    commonName?: string
    dnsNames?: string[]
    ipAddresses?: string[]
    uris?: string[]
    isCA?: boolean
    duration?: string
    usages?: string[]
    privateKey?: { algorithm?: 'RSA' | 'ECDSA' | 'Ed25519', size?: number, encoding?: 'PKCS1' | 'PKCS8' }
    issuerRef: { name: string, kind?: string, group?: string }
  }
}

interface Issuer {
  metadata: ObjectMeta
  spec: { selfSigned?: object, ca?: { secretName: string }, [other: string]: unknown }
}

interface Secret {
  metadata: ObjectMeta
  data?: Record<string, string>
}

interface WebhookConfiguration {
  metadata: ObjectMeta
  webhooks?: { name: string, clientConfig: { caBundle?: string } }[]
}

const log = (message: string): void => {
  console.error(`[cert-manager-standin] ${message}`)
}

const decode = (value: string | undefined): string => Buffer.from(value ?? '', 'base64').toString('utf8')
const encode = (value: string): string => Buffer.from(value, 'utf8').toString('base64')

/** A Go duration as cert-manager takes it ("2160h", "90m", "1h30m") in seconds. */
function durationSeconds(text: string): number {
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(h|m|s)/g)]
  if (parts.length === 0 || parts.map((part) => part[0]).join('') !== text) throw new Error(`not a duration: "${text}"`)
  const unit = { h: 3600, m: 60, s: 1 } as const
  return parts.reduce((sum, [, value, suffix]) => sum + Number(value) * unit[suffix as keyof typeof unit], 0)
}

/** cert-manager's usage names as openssl extensions; its default is digital signature + key encipherment. */
function extensions(certificate: Certificate, selfSigned: boolean): string {
  const { spec } = certificate
  const usages = spec.usages ?? ['digital signature', 'key encipherment']
  const keyUsage = new Set<string>()
  const extended: string[] = []
  const keyUsages: Record<string, string> = { 'digital signature': 'digitalSignature', 'key encipherment': 'keyEncipherment', 'cert sign': 'keyCertSign', 'crl sign': 'cRLSign', 'content commitment': 'nonRepudiation', 'key agreement': 'keyAgreement', 'data encipherment': 'dataEncipherment' }
  const extendedUsages: Record<string, string> = { 'server auth': 'serverAuth', 'client auth': 'clientAuth', 'code signing': 'codeSigning', 'email protection': 'emailProtection', 'timestamping': 'timeStamping', 'ocsp signing': 'OCSPSigning' }
  for (const usage of usages) {
    const simple = keyUsages[usage]
    const extendedUsage = extendedUsages[usage]
    if (simple !== undefined) keyUsage.add(simple)
    else if (extendedUsage !== undefined) extended.push(extendedUsage)
    else throw new Error(`Certificate ${certificate.metadata.name}: usage "${usage}" is not supported by the stand-in`)
  }
  // cert-manager adds "cert sign" to every CA certificate (pkg/util/pki: BuildKeyUsages).
  if (spec.isCA === true) keyUsage.add('keyCertSign')
  const names = [
    ...(spec.dnsNames ?? []).map((name) => `DNS:${name}`),
    ...(spec.ipAddresses ?? []).map((ip) => `IP:${ip}`),
    ...(spec.uris ?? []).map((uri) => `URI:${uri}`),
  ]
  return [
    '[req]', 'distinguished_name = dn', '[dn]', '[ext]',
    `basicConstraints = critical, CA:${spec.isCA === true ? 'TRUE' : 'FALSE'}`,
    `keyUsage = critical, ${[...keyUsage].join(', ')}`,
    ...(extended.length > 0 ? [`extendedKeyUsage = ${extended.join(', ')}`] : []),
    ...(names.length > 0 ? [`subjectAltName = ${names.join(', ')}`] : []),
    'subjectKeyIdentifier = hash',
    ...(selfSigned ? [] : ['authorityKeyIdentifier = keyid']),
    '',
  ].join('\n')
}

async function openssl(...args: string[]): Promise<void> {
  try {
    await run('openssl', args)
  } catch (error) {
    throw new Error(`openssl ${args.join(' ')}: ${(error as { stderr?: string }).stderr ?? String(error)}`, { cause: error })
  }
}

/** A new private key as cert-manager makes it: RSA 2048 unless the Certificate says otherwise. */
async function privateKey(certificate: Certificate, dir: string): Promise<string> {
  const { algorithm = 'RSA', size, encoding = 'PKCS1' } = certificate.spec.privateKey ?? {}
  const path = join(dir, 'key.pem')
  if (algorithm === 'ECDSA') {
    const curves: Record<number, string> = { 256: 'prime256v1', 384: 'secp384r1', 521: 'secp521r1' }
    const curve = curves[size ?? 256]
    if (curve === undefined) throw new Error(`Certificate ${certificate.metadata.name}: ECDSA size ${String(size)} is not one cert-manager accepts`)
    await openssl('ecparam', '-name', curve, '-genkey', '-noout', '-out', path)
  } else if (algorithm === 'RSA') {
    await openssl('genrsa', '-traditional', '-out', path, String(size ?? 2048))
  } else {
    throw new Error(`Certificate ${certificate.metadata.name}: private key algorithm ${algorithm} is not supported by the stand-in`)
  }
  if (encoding === 'PKCS1') return readFileSync(path, 'utf8')
  await openssl('pkcs8', '-topk8', '-nocrypt', '-in', path, '-out', join(dir, 'key-pkcs8.pem'))
  return readFileSync(join(dir, 'key-pkcs8.pem'), 'utf8')
}

interface Issued {
  readonly cert: string
  readonly key: string
  readonly ca: string
  readonly notBefore: Date
  readonly notAfter: Date
}

async function issue(certificate: Certificate, signer: { cert: string, key: string } | undefined): Promise<Issued> {
  const dir = mkdtempSync(join(tmpdir(), 'scg-cert-manager-standin-'))
  try {
    const key = await privateKey(certificate, dir)
    const { spec } = certificate
    // openssl's -days rounds the duration up to whole days; cert-manager's default is 90 days.
    const days = String(Math.max(1, Math.ceil(durationSeconds(spec.duration ?? '2160h') / 86_400)))
    const subject = spec.commonName === undefined ? '/' : `/CN=${spec.commonName}`
    const serial = `0x${randomBytes(16).toString('hex')}`
    writeFileSync(join(dir, 'openssl.cnf'), extensions(certificate, signer === undefined))
    const out = join(dir, 'cert.pem')
    if (signer === undefined) {
      await openssl('req', '-x509', '-new', '-key', join(dir, 'key.pem'), '-subj', subject, '-days', days, '-set_serial', serial,
        '-config', join(dir, 'openssl.cnf'), '-extensions', 'ext', '-out', out)
    } else {
      writeFileSync(join(dir, 'ca.crt'), signer.cert)
      writeFileSync(join(dir, 'ca.key'), signer.key, { mode: 0o600 })
      await openssl('req', '-new', '-key', join(dir, 'key.pem'), '-subj', subject, '-config', join(dir, 'openssl.cnf'), '-out', join(dir, 'csr.pem'))
      await openssl('x509', '-req', '-in', join(dir, 'csr.pem'), '-CA', join(dir, 'ca.crt'), '-CAkey', join(dir, 'ca.key'), '-set_serial', serial,
        '-days', days, '-extfile', join(dir, 'openssl.cnf'), '-extensions', 'ext', '-out', out)
    }
    const cert = readFileSync(out, 'utf8')
    const { stdout } = await run('openssl', ['x509', '-in', out, '-noout', '-startdate', '-enddate'])
    const date = (field: string): Date => new Date(/=(.*)$/m.exec(stdout.split('\n').find((line) => line.startsWith(field)) ?? '')?.[1] ?? '')
    return { cert, key, ca: signer?.cert ?? cert, notBefore: date('notBefore'), notAfter: date('notAfter') }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

class StandIn {
  private readonly cluster: Cluster

  constructor(cluster: Cluster) {
    this.cluster = cluster
  }

  private async get<T>(path: string): Promise<T | undefined> {
    const { status, body } = await this.cluster.rawJSON('GET', path)
    if (status === 404) return undefined
    if (status !== 200) throw new Error(`GET ${path}: HTTP ${String(status)}: ${JSON.stringify(body)}`)
    return body as T
  }

  private async send(method: string, path: string, body: unknown, contentType = 'application/json'): Promise<void> {
    const response = await this.cluster.raw(method, path, { body, contentType })
    if (response.status >= 300) throw new Error(`${method} ${path}: HTTP ${String(response.status)}: ${response.text}`)
  }

  private secretPath(namespace: string, name = ''): string {
    return `/api/v1/namespaces/${namespace}/secrets${name === '' ? '' : `/${name}`}`
  }

  private issuerOf(certificate: Certificate): Promise<Issuer | undefined> {
    const { kind = 'Issuer', group = 'cert-manager.io', name } = certificate.spec.issuerRef
    if (group !== 'cert-manager.io' || kind !== 'Issuer') {
      throw new Error(`Certificate ${certificate.metadata.name}: issuer ${kind}.${group} ${name}: the stand-in issues only from namespaced cert-manager.io Issuers (config/certmanager's)`)
    }
    return this.get<Issuer>(`/apis/cert-manager.io/v1/namespaces/${certificate.metadata.namespace ?? ''}/issuers/${name}`)
  }

  /** The Secret already issued for this Certificate, if it still fits it: the run is idempotent. */
  private async current(certificate: Certificate): Promise<Secret | undefined> {
    const namespace = certificate.metadata.namespace ?? ''
    const secret = await this.get<Secret>(this.secretPath(namespace, certificate.spec.secretName))
    if (secret?.metadata.annotations?.['cert-manager.io/certificate-name'] !== certificate.metadata.name) return undefined
    try {
      const x509 = new X509Certificate(decode(secret.data?.['tls.crt']))
      const names = (x509.subjectAltName ?? '').split(', ').filter((entry) => entry.startsWith('DNS:')).map((entry) => entry.slice(4))
      const fits = new Date(x509.validTo).getTime() > Date.now() + 3_600_000 && (certificate.spec.dnsNames ?? []).every((name) => names.includes(name))
      return fits ? secret : undefined
    } catch {
      return undefined
    }
  }

  private async writeSecret(certificate: Certificate, issuer: Issuer, issued: Issued): Promise<void> {
    const namespace = certificate.metadata.namespace ?? ''
    const { spec } = certificate
    const secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'kubernetes.io/tls',
      metadata: {
        name: spec.secretName,
        namespace,
        labels: { 'controller.cert-manager.io/fao': 'true' },
        annotations: {
          'cert-manager.io/certificate-name': certificate.metadata.name,
          'cert-manager.io/issuer-name': issuer.metadata.name,
          'cert-manager.io/issuer-kind': 'Issuer',
          'cert-manager.io/issuer-group': 'cert-manager.io',
          'cert-manager.io/common-name': spec.commonName ?? '',
          'cert-manager.io/alt-names': (spec.dnsNames ?? []).join(','),
          'cert-manager.io/ip-sans': (spec.ipAddresses ?? []).join(','),
          'cert-manager.io/uri-sans': (spec.uris ?? []).join(','),
          'e2e.servicecidr-guard.dev/issued-by': standIn,
        },
      },
      data: { 'tls.crt': encode(issued.cert), 'tls.key': encode(issued.key), 'ca.crt': encode(issued.ca) },
    }
    const exists = await this.get<Secret>(this.secretPath(namespace, spec.secretName))
    if (exists === undefined) await this.send('POST', this.secretPath(namespace), secret)
    else await this.send('PUT', this.secretPath(namespace, spec.secretName), secret)
    const status = {
      status: {
        conditions: [{ type: 'Ready', status: 'True', reason: 'Issued', message: `Certificate is up to date and has not expired (issued by the ${standIn})`, lastTransitionTime: new Date().toISOString(), observedGeneration: 1 }],
        notBefore: issued.notBefore.toISOString(),
        notAfter: issued.notAfter.toISOString(),
        revision: 1,
      },
    }
    await this.send('PATCH', `/apis/cert-manager.io/v1/namespaces/${namespace}/certificates/${certificate.metadata.name}/status`, status, 'application/merge-patch+json')
  }

  /** Issues every Certificate whose Issuer can sign now, until none is left or none can proceed. */
  async issueAll(): Promise<void> {
    const list = await this.get<{ items: Certificate[] }>('/apis/cert-manager.io/v1/certificates')
    let pending = list?.items ?? []
    log(`${String(pending.length)} Certificate(s): ${pending.map((entry) => `${entry.metadata.namespace ?? ''}/${entry.metadata.name}`).join(', ')}`)
    while (pending.length > 0) {
      const waiting: Certificate[] = []
      for (const certificate of pending) {
        const id = `${certificate.metadata.namespace ?? ''}/${certificate.metadata.name}`
        if (await this.current(certificate) !== undefined) {
          log(`${id}: Secret ${certificate.spec.secretName} already issued and valid; kept`)
          continue
        }
        const issuer = await this.issuerOf(certificate)
        if (issuer === undefined) {
          waiting.push(certificate)
          continue
        }
        let signer: { cert: string, key: string } | undefined
        if (issuer.spec.ca !== undefined) {
          const caSecret = await this.get<Secret>(this.secretPath(certificate.metadata.namespace ?? '', issuer.spec.ca.secretName))
          if (caSecret?.data?.['tls.crt'] === undefined) {
            waiting.push(certificate)
            continue
          }
          signer = { cert: decode(caSecret.data['tls.crt']), key: decode(caSecret.data['tls.key']) }
        } else if (issuer.spec.selfSigned === undefined) {
          throw new Error(`${id}: Issuer ${issuer.metadata.name} is of a type the stand-in cannot issue from (${Object.keys(issuer.spec).join(', ')}); it does selfSigned and ca`)
        }
        const issued = await issue(certificate, signer)
        await this.writeSecret(certificate, issuer, issued)
        log(`${id}: Secret ${certificate.spec.secretName} issued by Issuer ${issuer.metadata.name} (${signer === undefined ? 'self-signed' : 'CA'}), valid until ${issued.notAfter.toISOString()}`)
      }
      if (waiting.length === pending.length) {
        throw new Error(`no progress: ${waiting.map((entry) => entry.metadata.name).join(', ')} wait for an Issuer or a CA Secret that nothing issues`)
      }
      pending = waiting
    }
  }

  /** cainjector: ca.crt of the Certificate's Secret into every webhook of each annotated configuration. */
  async injectAll(): Promise<void> {
    for (const kind of ['validatingwebhookconfigurations', 'mutatingwebhookconfigurations']) {
      const base = `/apis/admissionregistration.k8s.io/v1/${kind}`
      const list = await this.get<{ items: WebhookConfiguration[] }>(base)
      for (const configuration of list?.items ?? []) {
        const from = configuration.metadata.annotations?.['cert-manager.io/inject-ca-from']
        if (from === undefined) continue
        const [namespace, name] = from.split('/')
        if (namespace === undefined || name === undefined) throw new Error(`${kind}/${configuration.metadata.name}: cert-manager.io/inject-ca-from must be <namespace>/<certificate>, not "${from}"`)
        const certificate = await this.get<Certificate>(`/apis/cert-manager.io/v1/namespaces/${namespace}/certificates/${name}`)
        if (certificate === undefined) throw new Error(`${kind}/${configuration.metadata.name}: Certificate ${from} does not exist`)
        const secret = await this.get<Secret>(this.secretPath(namespace, certificate.spec.secretName))
        const ca = secret?.data?.['ca.crt']
        if (ca === undefined) throw new Error(`${kind}/${configuration.metadata.name}: Secret ${namespace}/${certificate.spec.secretName} has no ca.crt`)
        const patch = (configuration.webhooks ?? []).map((_webhook, index) => ({ op: 'add', path: `/webhooks/${String(index)}/clientConfig/caBundle`, value: ca }))
        await this.send('PATCH', `${base}/${configuration.metadata.name}`, patch, 'application/json-patch+json')
        log(`${kind}/${configuration.metadata.name}: caBundle of ${String(patch.length)} webhook(s) set from ${namespace}/${certificate.spec.secretName} ca.crt`)
      }
    }
  }
}

const kubeconfig = process.env['KUBECONFIG']
if (kubeconfig === undefined || kubeconfig === '') throw new Error('KUBECONFIG must name the cluster')
const standin = new StandIn(Cluster.fromFile(kubeconfig.split(':')[0] ?? kubeconfig))
await standin.issueAll()
await standin.injectAll()
