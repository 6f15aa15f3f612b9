// Finding a free range: the first CIDR of a given size that the policy would admit.

import { familyWidth, hostsPerNetwork, makePrefix, mustParseCIDR, shortestIPv6ServiceCIDR, type Family, type Prefix } from './ip.ts'
import type { ClusterView, Policy, PrefixBounds } from './types.ts'

/**
 * Where to look when the policy sets no allowedRanges: the private ranges (RFC 1918 and the IPv6
 * unique local block, RFC 4193), never public space the cluster does not own.
 */
export const privateRanges: readonly Prefix[] = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fd00::/8'].map(mustParseCIDR)

/**
 * The longest prefix whose allocatable addresses (hostsPerNetwork) hold `size`, widened to the
 * policy's maximum prefix length if that is shorter. Undefined if none fits the bounds, or if no
 * prefix holds that many (hostsPerNetwork saturates at 2^64 - 1, an IPv6 /64; the allocator refuses
 * shorter IPv6 prefixes anyway).
 */
export function prefixLengthFor(family: Family, size: bigint, bounds: PrefixBounds | undefined): number | undefined {
  let bits = familyWidth(family)
  while (bits > 0 && hostsPerNetwork(family, bits) < size) bits--
  if (hostsPerNetwork(family, bits) < size) return undefined
  if (bounds === undefined) return bits
  if (bits > bounds.max) bits = bounds.max
  return bits < bounds.min ? undefined : bits
}

interface Interval {
  readonly first: bigint
  readonly last: bigint
}

const byFirst = (a: Interval, b: Interval): number => (a.first < b.first ? -1 : a.first > b.first ? 1 : 0)

/**
 * The first block of `bits` length in `space`, aligned to its size, that overlaps no obstacle:
 * two lists sorted by first address, walked as one (indices, not a generator: a denial's
 * suggestion may walk every ServiceCIDR of the cluster).
 */
function firstAlignedBlock(space: Prefix, a: readonly Interval[], b: readonly Interval[], bits: number): Prefix | undefined {
  const blockSize = 1n << BigInt(familyWidth(space.family) - bits)
  const align = (value: bigint): bigint => ((value + blockSize - 1n) / blockSize) * blockSize
  let candidate = align(space.first)
  let end = candidate + blockSize - 1n
  let i = 0
  let j = 0
  while (i < a.length || j < b.length) {
    const left = a[i]
    const right = b[j]
    let obstacle: Interval
    if (right === undefined || (left !== undefined && left.first <= right.first)) {
      obstacle = left as Interval
      i++
    } else {
      obstacle = right
      j++
    }
    if (end > space.last) return undefined
    if (obstacle.last < candidate) continue
    if (obstacle.first > end) break
    candidate = align(obstacle.last + 1n)
    end = candidate + blockSize - 1n
  }
  return end <= space.last ? makePrefix(space.family, candidate, bits) : undefined
}

/**
 * The first free CIDR of `bits` length in `family`: inside spec.allowedRanges (in policy order),
 * outside spec.deniedRanges, and overlapping no existing or just-admitted ServiceCIDR. Never an IPv6
 * prefix shorter than the allocator takes addresses from (shortestIPv6ServiceCIDR).
 */
export function findFreePrefix(policy: Policy, view: ClusterView, family: Family, bits: number): Prefix | undefined {
  const bounds = policy.prefixLength[family]
  if (bits > familyWidth(family) || (bounds !== undefined && (bits < bounds.min || bits > bounds.max))) return undefined
  if (family === 'IPv6' && bits < shortestIPv6ServiceCIDR) return undefined
  // The existing ServiceCIDRs come sorted from the view; the few others are sorted here.
  const existing = view.cidrsInOrder(family).map((entry) => entry.prefix)
  const others = [...policy.deniedRanges, ...[...view.pendingServiceCIDRs()].flatMap((record) => record.cidrs)]
    .filter((prefix) => prefix.family === family)
    .sort(byFirst)
  for (const space of policy.allowedRanges ?? privateRanges) {
    if (space.family !== family || space.bits > bits) continue
    const found = firstAlignedBlock(space, existing, others, bits)
    if (found !== undefined) return found
  }
  return undefined
}
