// Which IPAddresses would a ServiceCIDR's deletion orphan? The rule of `canDeleteCIDR` in
// kube-controller-manager (kubernetes pkg/controller/servicecidrs/servicecidrs_controller.go),
// which holds the ServiceCIDR's finalizer while this answer is not empty:
//
//  1. If every CIDR of the ServiceCIDR is contained (equal or shorter prefix) by a CIDR of another
//     ServiceCIDR, nothing can be orphaned (servicecidr.ContainsPrefix).
//  2. Otherwise, for each CIDR, the IPAddresses labelled managed-by: ipallocator.k8s.io and
//     ip-family of the CIDR's family are listed, and one blocks the deletion when this
//     ServiceCIDR is the only one containing its address (servicecidr.ContainsAddress, which looks
//     in every CIDR of every ServiceCIDR), where "containing" leaves out the network address and
//     the IPv4 broadcast address (PrefixContainsIP). The allocator labels an address with its own
//     family; a hand-made one labelled with the other family is listed in the other family's pass,
//     and blocks only a dual-stack ServiceCIDR (the one whose other CIDR contains it).
//
// Upstream scans every IPAddress of the family; the view answers range counts from a sorted index
// instead, so the cost does not grow with the number of addresses.
//
// One difference, because the webhook decides once, at the DELETE, where the controller decides
// again until the finalizer goes: a ServiceCIDR already being deleted covers nothing here. The
// controller's lister still holds it, so for `kubectl delete servicecidr a b` of two equal ranges
// each sees the other as its parent, both finalizers go, and the addresses are orphaned; deleted
// one after the other, the second hangs Terminating once the first is gone.

import { allocatableRange, prefixContainsAddress, type Prefix } from './ip.ts'
import type { ClusterView, IPAddressRecord, PlacedCIDR, ServiceCIDRRecord } from './types.ts'

export interface Orphans {
  /** How many IPAddresses only this ServiceCIDR contains. */
  readonly count: number
  /** The first few of them: in address order for each CIDR, then any labelled with the other family. */
  readonly sample: readonly IPAddressRecord[]
  /** The CIDRs of the ServiceCIDR that hold them (one per family at most). */
  readonly blocked: readonly Prefix[]
  /** Other ServiceCIDRs being deleted that overlap `blocked`: they would cover part or all of it, but cover nothing. */
  readonly leaving: readonly string[]
}

export interface Interval {
  readonly first: bigint
  readonly last: bigint
}

const byFirst = (a: Interval, b: Interval): number => (a.first < b.first ? -1 : a.first > b.first ? 1 : 0)

/** The parts of `range` that no interval of `covered` covers, in order. */
export function gaps(range: Interval, covered: readonly Interval[]): Interval[] {
  const result: Interval[] = []
  let cursor = range.first
  for (const { first, last } of [...covered].sort(byFirst)) {
    if (first > range.last) break
    if (first > cursor) result.push({ first: cursor, last: first - 1n })
    if (last >= cursor) cursor = last + 1n
  }
  if (cursor <= range.last) result.push({ first: cursor, last: range.last })
  return result
}

export function orphanedAddresses(view: ClusterView, target: ServiceCIDRRecord, sampleSize = 5): Orphans {
  const others = (prefix: Prefix): readonly PlacedCIDR[] =>
    view.cidrsOverlapping(prefix).filter((entry) => entry.record.name !== target.name && !entry.record.deleting)
  // An overlapping block with an equal or shorter prefix contains the whole CIDR.
  const hasParent = (prefix: Prefix): boolean => others(prefix).some((entry) => entry.prefix.bits <= prefix.bits)
  if (target.cidrs.every(hasParent)) return { count: 0, sample: [], blocked: [], leaving: [] }

  let count = 0
  const sample: IPAddressRecord[] = []
  const blocked: Prefix[] = []
  for (const prefix of target.cidrs) {
    const own = allocatableRange(prefix)
    if (own.last < own.first) continue
    // What the other ServiceCIDRs cover of this range, clipped to it. An IPv4 /31 or /32 and an
    // IPv6 /128 allocate nothing, so they cover nothing: their ranges are empty (last < first).
    const covered = others(prefix)
      .map((entry) => allocatableRange(entry.prefix))
      .map((range) => ({ first: range.first > own.first ? range.first : own.first, last: range.last < own.last ? range.last : own.last }))
      .filter((range) => range.first <= range.last)
    const addresses = view.addressesBetween(prefix.family, own.first, own.last)
    for (const gap of gaps(own, covered)) {
      const inGap = addresses.countBetween(gap.first, gap.last)
      if (inGap === 0) continue
      count += inGap
      if (blocked.at(-1) !== prefix) blocked.push(prefix)
      if (sample.length < sampleSize) {
        const gapAddresses = view.addressesBetween(prefix.family, gap.first, gap.last)
        for (let i = 0; i < gapAddresses.length && sample.length < sampleSize; i++) sample.push(gapAddresses.at(i))
      }
    }
  }
  // Addresses labelled with the other family: listed only if the ServiceCIDR has a CIDR of the
  // labelled family, and contained only by a CIDR of the address's own: both, so dual-stack.
  if (target.cidrs.length === 2 && target.cidrs[0]?.family !== target.cidrs[1]?.family) {
    for (const record of view.mislabelledAddresses()) {
      const prefix = target.cidrs.find((own) => prefixContainsAddress(own, record))
      if (prefix === undefined || others(prefix).some((entry) => prefixContainsAddress(entry.prefix, record))) continue
      count++
      if (!blocked.includes(prefix)) blocked.push(prefix)
      if (sample.length < sampleSize) sample.push(record)
    }
  }
  const leaving = new Set(blocked.flatMap((prefix) => view.cidrsOverlapping(prefix))
    .filter((entry) => entry.record.deleting && entry.record.name !== target.name)
    .map((entry) => entry.record.name))
  return { count, sample, blocked, leaving: [...leaving] }
}
