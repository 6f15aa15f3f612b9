// Which IPAddresses would a ServiceCIDR's deletion orphan? The rule of `canDeleteCIDR` in
// kube-controller-manager (kubernetes pkg/controller/servicecidrs/servicecidrs_controller.go),
// which holds the ServiceCIDR's finalizer while this answer is not empty:
//
//  1. If every CIDR of the ServiceCIDR is contained (equal or shorter prefix) by a CIDR of another
//     ServiceCIDR, nothing can be orphaned (servicecidr.ContainsPrefix).
//  2. Otherwise an IPAddress managed by the allocator (label managed-by: ipallocator.k8s.io, and the
//     ip-family label of the CIDR's family) blocks the deletion when this ServiceCIDR is the only
//     one containing it (servicecidr.ContainsAddress), where "containing" leaves out the network
//     address and the IPv4 broadcast address (PrefixContainsIP).
//
// Upstream scans every IPAddress of the family; the view answers range counts from a sorted index
// instead, so the cost does not grow with the number of addresses.

import { allocatableRange, containsPrefix, overlaps, type Prefix } from './ip.ts'
import type { ClusterView, IPAddressRecord, ServiceCIDRRecord } from './types.ts'

export interface Orphans {
  /** How many IPAddresses only this ServiceCIDR contains. */
  readonly count: number
  /** The first few of them, in address order. */
  readonly sample: readonly IPAddressRecord[]
}

export interface Interval {
  first: bigint
  last: bigint
}

/** The parts of `range` that no interval covers, in order. Sorts `covered` in place. */
export function gaps(range: Interval, covered: Interval[]): Interval[] {
  covered.sort((a, b) => (a.first < b.first ? -1 : a.first > b.first ? 1 : 0))
  const result: Interval[] = []
  let cursor = range.first
  for (const { first, last } of covered) {
    if (last < cursor) continue
    if (first > range.last) break
    if (first > cursor) result.push({ first: cursor, last: first - 1n })
    cursor = last + 1n
    if (cursor > range.last) return result
  }
  if (cursor <= range.last) result.push({ first: cursor, last: range.last })
  return result
}

const hasParent = (others: readonly ServiceCIDRRecord[], prefix: Prefix): boolean =>
  others.some((other) => other.cidrs.some((cidr) => containsPrefix(cidr, prefix)))

export function orphanedAddresses(view: ClusterView, target: ServiceCIDRRecord, sampleSize = 5): Orphans {
  const others = [...view.serviceCIDRs()].filter((other) => other.name !== target.name)
  if (target.cidrs.every((prefix) => hasParent(others, prefix))) return { count: 0, sample: [] }

  let count = 0
  const sample: IPAddressRecord[] = []
  for (const prefix of target.cidrs) {
    const own = allocatableRange(prefix)
    if (own.last < own.first) continue
    const coveredByOthers = others.flatMap((other) =>
      other.cidrs.filter((cidr) => overlaps(cidr, prefix)).map((cidr) => ({ ...allocatableRange(cidr) })))
    const addresses = view.addressesBetween(prefix.family, own.first, own.last)
    for (const gap of gaps({ ...own }, coveredByOthers)) {
      const inGap = addresses.countBetween(gap.first, gap.last)
      if (inGap === 0) continue
      count += inGap
      if (sample.length < sampleSize) {
        const gapAddresses = view.addressesBetween(prefix.family, gap.first, gap.last)
        for (let i = 0; i < gapAddresses.length && sample.length < sampleSize; i++) sample.push(gapAddresses.at(i))
      }
    }
  }
  return { count, sample }
}
