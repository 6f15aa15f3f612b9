// How many Service addresses the cluster can still hand out, per family: the union of what every
// ServiceCIDR that is not Terminating can allocate, less the allocator-managed IPAddresses in it.
// Overlapping ranges are counted once. The kube-apiserver allocator takes addresses only from
// ServiceCIDRs that are not being deleted (pkg/registry/core/service/ipallocator/cidrallocator.go).

import { allocatableRange, type Family } from './ip.ts'
import type { ClusterView } from './types.ts'

export interface Capacity {
  readonly family: Family
  /** Addresses the ready ranges can allocate, overlaps counted once. */
  readonly usable: bigint
  /** Allocator-managed IPAddresses inside those ranges. */
  readonly used: bigint
  readonly free: bigint
}

interface Interval {
  first: bigint
  last: bigint
}

function union(intervals: Interval[]): Interval[] {
  intervals.sort((a, b) => (a.first < b.first ? -1 : a.first > b.first ? 1 : 0))
  const merged: Interval[] = []
  for (const interval of intervals) {
    const previous = merged.at(-1)
    if (previous !== undefined && interval.first <= previous.last + 1n) {
      if (interval.last > previous.last) previous.last = interval.last
    } else {
      merged.push({ ...interval })
    }
  }
  return merged
}

export function capacity(view: ClusterView, family: Family): Capacity {
  const ranges: Interval[] = []
  for (const record of view.serviceCIDRs()) {
    if (record.deleting) continue
    for (const prefix of record.cidrs) {
      const range = allocatableRange(prefix)
      if (prefix.family === family && range.first <= range.last) ranges.push({ ...range })
    }
  }
  let usable = 0n
  let used = 0n
  for (const { first, last } of union(ranges)) {
    usable += last - first + 1n
    used += BigInt(view.addressesBetween(family, first, last).length)
  }
  return { family, usable, used, free: usable - used }
}
