// Finding a free range: the first CIDR of a given size that the policy would admit.

import { familyWidth, makePrefix, parseCIDR, type Family, type Prefix } from './ip.ts'
import type { ClusterView, Policy, PrefixBounds } from './types.ts'

/**
 * Where to look when the policy sets no allowedRanges: the private ranges (RFC 1918 and the IPv6
 * unique local block, RFC 4193), never public space the cluster does not own.
 */
export const privateRanges: readonly Prefix[] = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fd00::/8'].map((text) => {
  const parsed = parseCIDR(text)
  if (!parsed.ok) throw new Error(`bad built-in range ${text}`)
  return parsed.value
})

/**
 * The longest prefix whose allocatable addresses (hostsPerNetwork in kubernetes
 * pkg/registry/core/service/ipallocator: 2^n - 2 for IPv4, 2^n - 1 for IPv6) hold `size`, widened
 * to the policy's maximum prefix length if that is shorter. Undefined if none fits the bounds.
 */
export function prefixLengthFor(family: Family, size: bigint, bounds: PrefixBounds | undefined): number | undefined {
  const width = familyWidth(family)
  const reserved = family === 'IPv4' ? 2n : 1n
  let bits = width
  while (bits > 0 && (1n << BigInt(width - bits)) - reserved < size) bits--
  if ((1n << BigInt(width - bits)) - reserved < size) return undefined
  if (bounds === undefined) return bits
  if (bits > bounds.max) bits = bounds.max
  return bits < bounds.min ? undefined : bits
}

interface Interval {
  readonly first: bigint
  readonly last: bigint
}

function firstAlignedBlock(space: Prefix, obstacles: readonly Interval[], bits: number): Prefix | undefined {
  const blockSize = 1n << BigInt(familyWidth(space.family) - bits)
  const align = (value: bigint): bigint => ((value + blockSize - 1n) / blockSize) * blockSize
  let candidate = align(space.first)
  for (const obstacle of obstacles) {
    if (candidate + blockSize - 1n > space.last) return undefined
    if (obstacle.last < candidate) continue
    if (obstacle.first > candidate + blockSize - 1n) break
    candidate = align(obstacle.last + 1n)
  }
  return candidate + blockSize - 1n <= space.last ? makePrefix(space.family, candidate, bits) : undefined
}

/**
 * The first free CIDR of `bits` length in `family`: inside spec.allowedRanges (in policy order),
 * outside spec.deniedRanges, and overlapping no existing or just-admitted ServiceCIDR.
 */
export function findFreePrefix(policy: Policy, view: ClusterView, family: Family, bits: number): Prefix | undefined {
  const bounds = policy.prefixLength[family]
  if (bits > familyWidth(family) || (bounds !== undefined && (bits < bounds.min || bits > bounds.max))) return undefined
  const taken: Prefix[] = [...policy.deniedRanges]
  for (const records of [view.serviceCIDRs(), view.pendingServiceCIDRs()]) {
    for (const record of records) taken.push(...record.cidrs)
  }
  const obstacles = taken
    .filter((prefix) => prefix.family === family)
    .sort((a, b) => (a.first < b.first ? -1 : a.first > b.first ? 1 : 0))
  for (const space of policy.allowedRanges ?? privateRanges) {
    if (space.family !== family || space.bits > bits) continue
    const found = firstAlignedBlock(space, obstacles, bits)
    if (found !== undefined) return found
  }
  return undefined
}
