// An in-memory Lease with kube-apiserver's optimistic concurrency: every write bumps the
// resourceVersion, and a write whose metadata.resourceVersion is not the current one is refused with
// a conflict, as the apiserver answers 409 (GuaranteedUpdate's precondition in
// k8s.io/apiserver/pkg/registry/generic/registry/store.go). Faults are switched on per test.

import * as leaseModule from '../../src/cluster/lease.ts'
import { StoreError, type LeaseObject, type LeaseStore, type StoreErrorKind } from '../../src/cluster/lease.ts'
import { reservationsAnnotation } from '../../src/cluster/reservations.ts'

/**
 * How the build reads a PUT's answer. bench/run.ts runs this file over an older checkout for
 * --baseline, whose KubeLeaseStore parsed the answer whole (before storedLease).
 */
const storedLease = (leaseModule as Partial<typeof leaseModule>).storedLease ?? ((_sent: LeaseObject, answer: string): LeaseObject => JSON.parse(answer) as LeaseObject)

export class MemoryLeaseStore implements LeaseStore {
  readonly where = 'servicecidr-guard-system/servicecidr-guard-reservations'
  /**
   * The Lease as kube-apiserver would send it: JSON text. A get is a JSON.parse of it; an update a
   * JSON.stringify of what was sent and the answer read by storedLease. That is the JSON work
   * KubeLeaseStore (src/cluster/lease.ts) does, so bench/server.ts, which measures the review path
   * with this store in place of kube-apiserver, counts the webhook's own share of it, no more.
   * Every caller gets its own copy, of the objects this store makes.
   */
  private text: string | undefined
  private version = 1
  gets = 0
  updates = 0
  conflicts = 0
  /** Every call fails this way until cleared. */
  failWith: StoreErrorKind | undefined
  /** Calls never answer (an apiserver that accepted the connection and hangs). */
  hang = false
  /** Each call takes this long. */
  latencyMs = 0
  /** Runs just before an update is checked: another replica writing in between. */
  beforeUpdate: (() => void) | undefined

  constructor(options: { missing?: boolean, annotation?: string } = {}) {
    if (options.missing !== true) {
      this.store({
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: {
          name: 'servicecidr-guard-reservations',
          namespace: 'servicecidr-guard-system',
          resourceVersion: String(this.version),
          labels: { 'app.kubernetes.io/name': 'servicecidr-guard' },
          ...(options.annotation === undefined ? {} : { annotations: { [reservationsAnnotation]: options.annotation } }),
        },
        spec: {},
      })
    }
  }

  private store(lease: LeaseObject): void {
    this.text = JSON.stringify(lease)
  }

  private get lease(): LeaseObject | undefined {
    return this.text === undefined ? undefined : JSON.parse(this.text) as LeaseObject
  }

  get resourceVersion(): number {
    return this.version
  }

  /** The reservations annotation as stored. */
  get annotation(): string | undefined {
    return this.lease?.metadata?.annotations?.[reservationsAnnotation]
  }

  private async call(): Promise<void> {
    if (this.hang) await new Promise<never>(() => undefined)
    if (this.latencyMs > 0) await new Promise((resolve) => setTimeout(resolve, this.latencyMs))
    if (this.failWith !== undefined) throw new StoreError(this.failWith, `injected ${this.failWith}`)
    if (this.text === undefined) throw new StoreError('missing', 'leases.coordination.k8s.io "servicecidr-guard-reservations" not found')
  }

  async get(): Promise<LeaseObject> {
    this.gets++
    await this.call()
    return this.lease as LeaseObject
  }

  async update(sent: LeaseObject): Promise<LeaseObject> {
    this.updates++
    await this.call()
    this.beforeUpdate?.()
    if (sent.metadata?.resourceVersion !== String(this.version)) {
      this.conflicts++
      throw new StoreError('conflict', 'Operation cannot be fulfilled on leases.coordination.k8s.io "servicecidr-guard-reservations": the object has been modified; please apply your changes to the latest version and try again')
    }
    this.version++
    this.store({ ...sent, metadata: { ...sent.metadata, resourceVersion: String(this.version) } })
    return storedLease(sent, this.text ?? '', 'PUT Lease')
  }

  /** Someone else's write: the annotation replaced, the version bumped. */
  overwrite(annotation: string): void {
    const current = this.lease as LeaseObject
    this.version++
    this.store({ ...current, metadata: { ...current.metadata, resourceVersion: String(this.version), annotations: { [reservationsAnnotation]: annotation } } })
  }
}
