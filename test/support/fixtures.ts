// Builders for the unit tests: the same functions production uses to turn Kubernetes objects into
// records, so that a test reads like the objects it stands for.

import { mustParseCIDR } from '../../src/policy/ip.ts'
import { ClusterState, familyLabel, managedByLabel, toIPAddressRecord, toServiceCIDRRecord } from '../../src/policy/state.ts'
import {
  managedByAllocator,
  type IPAddressRecord,
  type ParentRef,
  type Policy,
  type ReviewRequest,
  type ServiceCIDRObject,
  type ServiceCIDRRecord,
} from '../../src/policy/types.ts'

/** A canonical CIDR; throws on anything else, so that a typo in a table fails loudly. */
export const prefix = mustParseCIDR

/** Like makeServiceCIDR in kubernetes' servicecidrs_controller_test.go. */
export function serviceCIDR(name: string, ...cidrs: string[]): ServiceCIDRRecord {
  const record = toServiceCIDRRecord({ metadata: { name }, spec: { cidrs } })
  if (record === undefined) throw new Error('unreachable: the fixture has a name')
  return record
}

export function terminating(record: ServiceCIDRRecord): ServiceCIDRRecord {
  return { ...record, deleting: true }
}

export interface IPAddressOptions {
  /** The ip-family label; by default the family of the name, as the allocator writes it. */
  readonly family?: string | undefined
  /** The managed-by label; by default ipallocator.k8s.io. */
  readonly managedBy?: string | undefined
  readonly parentRef?: Partial<ParentRef> | undefined
}

/** Like makeIPAddress in kubernetes' servicecidrs_controller_test.go: labelled as the allocator labels it. */
export function ipAddress(name: string, options: IPAddressOptions = {}): IPAddressRecord {
  const labels: Record<string, string> = {}
  const family = 'family' in options ? options.family : name.includes(':') ? 'IPv6' : 'IPv4'
  const managedBy = 'managedBy' in options ? options.managedBy : managedByAllocator
  if (family !== undefined) labels[familyLabel] = family
  if (managedBy !== undefined) labels[managedByLabel] = managedBy
  const record = toIPAddressRecord({ metadata: { name, labels }, spec: { parentRef: options.parentRef } })
  if (record === undefined) throw new Error(`test fixture: ${name} is not an IP address`)
  return record
}

/** The address a Service holds, with the parentRef the apiserver writes. */
export function serviceIP(ip: string, namespace: string, service: string): IPAddressRecord {
  return ipAddress(ip, { parentRef: { group: '', resource: 'services', namespace, name: service } })
}

export interface ClusterFixture {
  readonly serviceCIDRs?: readonly ServiceCIDRRecord[]
  readonly ipAddresses?: readonly IPAddressRecord[]
  /** Reserved CREATEs, expiring at time 1000. */
  readonly pending?: readonly ServiceCIDRRecord[]
}

export function cluster({ serviceCIDRs = [], ipAddresses = [], pending = [] }: ClusterFixture = {}): ClusterState {
  const state = new ClusterState()
  state.replaceServiceCIDRs(serviceCIDRs)
  state.replaceIPAddresses(ipAddresses)
  for (const record of pending) state.reserve(record, 1000)
  return state
}

export interface PolicyFixture {
  readonly allowedRanges?: readonly string[] | undefined
  readonly deniedRanges?: readonly string[]
  readonly overlap?: Policy['overlap']
  readonly prefixLength?: Policy['prefixLength']
  readonly requireUnused?: boolean
  readonly protectedNames?: readonly string[]
  readonly exemptions?: Partial<Policy['exemptions']>
  readonly enforcement?: Policy['enforcement']
  readonly capacity?: Policy['capacity']
}

/** The defaults of src/config/policy.ts, with CIDRs written as text. */
export function policy(fixture: PolicyFixture = {}): Policy {
  return {
    allowedRanges: fixture.allowedRanges?.map(prefix),
    deniedRanges: (fixture.deniedRanges ?? []).map(prefix),
    overlap: fixture.overlap ?? 'Deny',
    prefixLength: fixture.prefixLength ?? {},
    deletion: { requireUnused: fixture.requireUnused ?? true },
    protectedNames: fixture.protectedNames ?? [],
    exemptions: { usernames: fixture.exemptions?.usernames ?? [], groups: fixture.exemptions?.groups ?? [] },
    enforcement: fixture.enforcement ?? 'Deny',
    capacity: fixture.capacity ?? { warnWhenFreeBelow: {} },
  }
}

export const admin = { username: 'kubernetes-admin', groups: ['system:masters', 'system:authenticated'] }
export const apiserver = { username: 'system:apiserver', groups: ['system:masters'] }

const object = (name: string, cidrs: readonly string[]): ServiceCIDRObject => ({ name, cidrs })

export function create(name: string, cidrs: readonly string[], userInfo = admin): ReviewRequest {
  return { operation: 'CREATE', name, userInfo, object: object(name, cidrs), oldObject: undefined, dryRun: false }
}

export function update(name: string, oldCIDRs: readonly string[], cidrs: readonly string[], userInfo = admin): ReviewRequest {
  return { operation: 'UPDATE', name, userInfo, object: object(name, cidrs), oldObject: object(name, oldCIDRs), dryRun: false }
}

/** kube-apiserver sends the object being deleted as oldObject, and no object. */
export function remove(name: string, cidrs: readonly string[] | undefined, userInfo = admin): ReviewRequest {
  return { operation: 'DELETE', name, userInfo, object: undefined, oldObject: cidrs && object(name, cidrs), dryRun: false }
}
