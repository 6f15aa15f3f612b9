// How many Service addresses the cluster can still hand out, per family: the union of what every
// ServiceCIDR that is not Terminating can allocate, less the IPAddresses in it, whoever manages them.
// Overlapping ranges are counted once. The kube-apiserver allocator takes addresses only from
// ServiceCIDRs that are not being deleted (pkg/registry/core/service/ipallocator/cidrallocator.go),
// and never from an IPv6 CIDR shorter than /64, which NewIPAllocator refuses.

import { allocatableRange, allocates, type Family } from './ip.ts'
import type { ClusterView, Policy } from './types.ts'

export interface Capacity {
  readonly family: Family
  /** Addresses the ready ranges can allocate, overlaps counted once. */
  readonly usable: bigint
  /** IPAddresses inside those ranges, whatever their labels: each takes its address (occupiedBetween). */
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

/** The capacity of `family`; `without` leaves one ServiceCIDR out (the one being deleted). */
export function capacity(view: ClusterView, family: Family, without?: string): Capacity {
  const ranges: Interval[] = []
  for (const record of view.serviceCIDRs()) {
    if (record.deleting || record.name === without) continue
    for (const prefix of record.cidrs) {
      if (prefix.family !== family || !allocates(prefix)) continue
      const range = allocatableRange(prefix)
      if (range.first <= range.last) ranges.push({ ...range })
    }
  }
  let usable = 0n
  let used = 0n
  for (const { first, last } of union(ranges)) {
    usable += last - first + 1n
    used += BigInt(view.occupiedBetween(family, first, last))
  }
  return { family, usable, used, free: usable - used }
}

/**
 * spec.capacity.warnWhenFreeBelow: one warning per family that has fallen below its threshold.
 * `without` counts the cluster as it will be once that ServiceCIDR is gone.
 */
export function capacityWarnings(policy: Policy, view: ClusterView, families: readonly Family[], without?: string): string[] {
  const warnings: string[] = []
  for (const family of new Set(families)) {
    const threshold = policy.capacity.warnWhenFreeBelow[family]
    if (threshold === undefined) continue
    const { free, usable } = capacity(view, family, without)
    if (free >= BigInt(threshold)) continue
    const state = without === undefined ? 'only' : `once ServiceCIDR "${without}" is gone, only`
    const verb = without === undefined ? 'are' : 'will be'
    warnings.push(
      `servicecidr-guard: ${state} ${free} of ${usable} ${family} Service addresses ${verb} free in this cluster ` +
        `(the policy warns below ${threshold}); add a ServiceCIDR${family === 'IPv6' ? ' of /64 or longer (the allocator takes nothing from a shorter IPv6 prefix)' : ''} before Services fail with "range is full"`,
    )
  }
  return warnings
}
