// One coordination.k8s.io/v1 Lease, read and replaced whole: GET, and PUT with the resourceVersion
// it was read at, so kube-apiserver refuses the write (409 Conflict) if anyone wrote in between.
// This is optimistic concurrency as client-go's retry.RetryOnConflict uses it; the caller decides
// what to do on a conflict. Requests go over one keep-alive connection pool: every admitted CREATE
// pays for one of them, so a TLS handshake each would double the cost.

import type { KubeConfig } from '@kubernetes/client-node'
import { Agent, request, type RequestOptions } from 'node:https'
import { stringAt } from '../json/find.ts'
import { apiURL, statusMessage } from './api.ts'

/** The fields of a Lease this code reads; the rest is kept as read and sent back unchanged. */
export interface LeaseObject {
  readonly apiVersion?: string
  readonly kind?: string
  readonly metadata?: {
    readonly name?: string
    readonly namespace?: string
    readonly resourceVersion?: string
    readonly annotations?: Readonly<Record<string, string>>
    /** Left out of a PUT (see update). */
    readonly managedFields?: readonly unknown[]
    readonly [key: string]: unknown
  }
  readonly [key: string]: unknown
}

/**
 * How a read or write failed. conflict: the Lease changed since it was read (409). missing: it does
 * not exist (404). forbidden: RBAC refuses (401, 403). rejected: kube-apiserver refused the object
 * (400, 422, 413: for example annotations over 256 KiB). unavailable: no answer, or 429 / 5xx.
 * timeout: no answer in time.
 */
export type StoreErrorKind = 'conflict' | 'missing' | 'forbidden' | 'rejected' | 'unavailable' | 'timeout'

export class StoreError extends Error {
  readonly kind: StoreErrorKind

  constructor(kind: StoreErrorKind, message: string, options?: ErrorOptions) {
    super(message, options)
    this.kind = kind
  }
}

/** Where the reservations live: one object, read and written whole. */
export interface LeaseStore {
  /** namespace/name, for messages. */
  readonly where: string
  get(timeoutMs: number): Promise<LeaseObject>
  /** Replaces the Lease; `lease.metadata.resourceVersion` is the precondition. Answers it as stored (storedLease). */
  update(lease: LeaseObject, timeoutMs: number): Promise<LeaseObject>
}

export function kindOfStatus(status: number): StoreErrorKind {
  if (status === 409) return 'conflict'
  if (status === 404) return 'missing'
  if (status === 401 || status === 403) return 'forbidden'
  if (status === 429 || status >= 500) return 'unavailable'
  return 'rejected'
}

/** A Lease as kube-apiserver answers a GET. */
function parsedLease(answer: string, what: string): LeaseObject {
  let lease: unknown
  try {
    lease = JSON.parse(answer)
  } catch (error) {
    throw new StoreError('unavailable', `${what}: the answer is not JSON`, { cause: error })
  }
  if (typeof lease !== 'object' || lease === null || Array.isArray(lease)) throw new StoreError('unavailable', `${what}: the answer is not an object`)
  return lease as LeaseObject
}

const resourceVersionPath = ['metadata', 'resourceVersion']

/**
 * The Lease kube-apiserver stored from a PUT of `sent`, given its answer: what was sent, at the
 * resourceVersion the answer gives, which the next PUT needs as its precondition. The rest of the
 * answer is not parsed: a write sends the whole Lease, and parsing it back built it all again, every
 * reservation included, for every write. What kube-apiserver sets on a write and this copy lacks
 * does not matter to the next one: managedFields are left out of a PUT anyway, and a client's
 * metadata.generation is ignored (BeforeUpdate, k8s.io/apiserver/pkg/registry/rest/update.go,
 * keeps the stored one). If someone else changes the Lease, the next PUT conflicts and reads it.
 */
export function storedLease(sent: LeaseObject, answer: string, what: string): LeaseObject {
  const resourceVersion = stringAt(answer, resourceVersionPath) ?? parsedLease(answer, what).metadata?.resourceVersion
  if (typeof resourceVersion !== 'string' || resourceVersion === '') throw new StoreError('unavailable', `${what}: the answer has no metadata.resourceVersion`)
  return { ...sent, metadata: { ...sent.metadata, resourceVersion } }
}

export class KubeLeaseStore implements LeaseStore {
  readonly where: string
  private readonly kubeConfig: KubeConfig
  private readonly path: string
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 4 })

  constructor(kubeConfig: KubeConfig, namespace: string, name: string) {
    this.kubeConfig = kubeConfig
    this.where = `${namespace}/${name}`
    this.path = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/leases/${encodeURIComponent(name)}`
  }

  async get(timeoutMs: number): Promise<LeaseObject> {
    return parsedLease(await this.send('GET', this.path, undefined, timeoutMs), `GET Lease ${this.where}`)
  }

  /**
   * The PUT leaves out metadata.managedFields: kube-apiserver then keeps the stored ones and records
   * this update in them (decodeLiveOrNew, k8s.io/apimachinery/pkg/util/managedfields/internal/
   * fieldmanager.go: "to prevent clients who don't understand managedFields from deleting it"). They
   * are a third of the Lease as `kubectl apply` leaves it (650 of 2,140 bytes with three
   * reservations, on the local control plane), and every admitted CREATE sent them back. Of the
   * answer, only the new resourceVersion is read (see storedLease).
   */
  async update(lease: LeaseObject, timeoutMs: number): Promise<LeaseObject> {
    const metadata = { ...lease.metadata }
    delete metadata.managedFields
    const sent = { ...lease, metadata }
    return storedLease(sent, await this.send('PUT', `${this.path}?fieldManager=servicecidr-guard`, JSON.stringify(sent), timeoutMs), `PUT Lease ${this.where}`)
  }

  /** Closes the kept-alive connections. */
  close(): void {
    this.agent.destroy()
  }

  /** The answer's body, for a 200. */
  private async send(method: 'GET' | 'PUT', path: string, body: string | undefined, timeoutMs: number): Promise<string> {
    const cluster = this.kubeConfig.getCurrentCluster()
    if (cluster === null) throw new StoreError('unavailable', 'the kubeconfig names no cluster')
    const headers: Record<string, string | number> = { accept: 'application/json' }
    if (body !== undefined) {
      headers['content-type'] = 'application/json'
      headers['content-length'] = Buffer.byteLength(body)
    }
    const options: RequestOptions = { method, headers }
    // Credentials, CA and client certificate as the kubeconfig says (the service account token is
    // re-read as it rotates). Our own keep-alive pool replaces the library's agent unless the
    // kubeconfig names a proxy, which only the library's agent speaks.
    await this.kubeConfig.applyToHTTPSOptions(options)
    if (cluster.proxyUrl === undefined) options.agent = this.agent
    options.signal = AbortSignal.timeout(Math.max(1, timeoutMs))
    const url = new URL(apiURL(cluster.server, path))
    return new Promise<string>((resolve, reject) => {
      const call = request(url, options, (response) => {
        const chunks: Buffer[] = []
        response.on('data', (chunk: Buffer) => chunks.push(chunk))
        response.on('error', (error) => {
          reject(new StoreError('unavailable', `${method} Lease ${this.where}: ${error.message}`, { cause: error }))
        })
        response.on('end', () => {
          const status = response.statusCode ?? 0
          const text = Buffer.concat(chunks).toString('utf8')
          if (status !== 200) {
            reject(new StoreError(kindOfStatus(status), `${method} Lease ${this.where}: HTTP ${String(status)}: ${statusMessage(text)}`))
            return
          }
          resolve(text)
        })
      })
      call.on('error', (error) => {
        const timedOut = error.name === 'AbortError' || error.name === 'TimeoutError'
        reject(new StoreError(timedOut ? 'timeout' : 'unavailable', `${method} Lease ${this.where}: ${timedOut ? `no answer within ${String(timeoutMs)} ms` : error.message}`, { cause: error }))
      })
      call.end(body)
    })
  }
}
