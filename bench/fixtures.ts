// Synthetic clusters for the benchmarks, shaped as the apiserver returns them.

import { formatAddress } from '../src/policy/ip.ts'
import { ClusterState, StringPool, toIPAddressRecord, toServiceCIDRRecord, type ObjectLike } from '../src/policy/state.ts'

/** 1,000 /24 ServiceCIDRs side by side from 10.0.0.0, plus the default `kubernetes` range. */
export function serviceCIDRObjects(count: number): ObjectLike[] {
  const objects: ObjectLike[] = [{ metadata: { name: 'kubernetes' }, spec: { cidrs: ['10.96.0.0/28'] } }]
  for (let i = 0; i < count; i++) {
    objects.push({ metadata: { name: `range-${i}` }, spec: { cidrs: [`10.${i >> 8}.${i & 255}.0/24`] } })
  }
  return objects
}

/** An IPAddress as the apiserver stores it, with managedFields and all. */
export function ipAddressObject(value: bigint, index: number): ObjectLike {
  const name = formatAddress('IPv4', value)
  const metadata = {
    name,
    uid: `7d3c1e2a-0000-4000-8000-${index.toString(16).padStart(12, '0')}`,
    resourceVersion: String(100000 + index),
    creationTimestamp: '2026-11-29T10:00:00Z',
    labels: { 'ipaddress.kubernetes.io/ip-family': 'IPv4', 'ipaddress.kubernetes.io/managed-by': 'ipallocator.k8s.io' },
    managedFields: [{ manager: 'kube-apiserver', operation: 'Update', apiVersion: 'networking.k8s.io/v1', time: '2026-11-29T10:00:00Z', fieldsType: 'FieldsV1', fieldsV1: { 'f:metadata': { 'f:labels': {} }, 'f:spec': { 'f:parentRef': {} } } }],
  }
  const object = {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'IPAddress',
    metadata,
    spec: { parentRef: { group: '', resource: 'services', namespace: `team-${index % 50}`, name: `service-${index}` } },
  }
  return object
}

/** The block 100,000 addresses are allocated from: one /15, not covered by any other ServiceCIDR. */
export const bigRange = '172.16.0.0/15'
const bigRangeFirst = (172n << 24n) | (16n << 16n)

export function buildState(serviceCIDRs: number, ipAddresses: number): ClusterState {
  const state = new ClusterState()
  state.replaceServiceCIDRs(serviceCIDRObjects(serviceCIDRs).flatMap((object) => toServiceCIDRRecord(object) ?? []))
  state.upsertServiceCIDR(toServiceCIDRRecord({ metadata: { name: 'big' }, spec: { cidrs: [bigRange] } })!)
  // One object at a time, projected at once, as the reflector does a page at a time: the full
  // objects never all exist together.
  const pool = new StringPool()
  const records = []
  for (let i = 0; i < ipAddresses; i++) {
    const record = toIPAddressRecord(ipAddressObject(bigRangeFirst + 1n + BigInt(i), i), pool)
    if (record) records.push(record)
  }
  state.replaceIPAddresses(records)
  return state
}

export function admissionReview(operation: 'CREATE' | 'DELETE', name: string, cidrs: string[], uid: string): string {
  const object = { apiVersion: 'networking.k8s.io/v1', kind: 'ServiceCIDR', metadata: { name, uid: 'a1b2', resourceVersion: '42', creationTimestamp: '2026-11-29T10:00:00Z' }, spec: { cidrs } }
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid,
      kind: { group: 'networking.k8s.io', version: 'v1', kind: 'ServiceCIDR' },
      resource: { group: 'networking.k8s.io', version: 'v1', resource: 'servicecidrs' },
      requestKind: { group: 'networking.k8s.io', version: 'v1', kind: 'ServiceCIDR' },
      requestResource: { group: 'networking.k8s.io', version: 'v1', resource: 'servicecidrs' },
      name,
      operation,
      userInfo: { username: 'kubernetes-admin', groups: ['kubeadm:cluster-admins', 'system:authenticated'] },
      object: operation === 'DELETE' ? null : object,
      oldObject: operation === 'DELETE' ? object : null,
      dryRun: false,
      options: operation === 'DELETE' ? { kind: 'DeleteOptions', apiVersion: 'meta.k8s.io/v1', propagationPolicy: 'Background' } : { kind: 'CreateOptions', apiVersion: 'meta.k8s.io/v1', fieldManager: 'kubectl-client-side-apply' },
    },
  })
}

export const benchPolicy = `
apiVersion: servicecidr-guard/v1alpha1
kind: Policy
spec:
  allowedRanges: [10.0.0.0/8, 172.16.0.0/12]
  overlap: Deny
  prefixLength: {ipv4: {min: 12, max: 28}}
  deletion: {requireUnused: true}
`

export const scenarios = {
  /** Inside the allowed ranges, free: admitted after checking 1,001 ranges for overlap. */
  createAllowed: { operation: 'CREATE', name: 'new-range', cidrs: ['10.200.0.0/24'] },
  /** Overlaps range-7: denied, with a free range suggested. */
  createDenied: { operation: 'CREATE', name: 'clash', cidrs: ['10.0.7.0/25'] },
  /** 100,000 Services hold addresses only this range covers: denied, naming five of them. */
  deleteInUse: { operation: 'DELETE', name: 'big', cidrs: [bigRange] },
} as const

/**
 * The review bench/run.ts sends to every server side by side (an admitted CREATE), and which the
 * edge row of bench/server.ts answers with the one decision it made for it: one body, so the edge
 * row's answers echo the uid the load sends.
 */
export function sideBySideReview(): string {
  const { createAllowed } = scenarios
  return admissionReview(createAllowed.operation, createAllowed.name, [...createAllowed.cidrs], 'side-by-side')
}
