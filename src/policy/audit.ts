// The audit of a cluster as it stands: every ServiceCIDR checked by `decide` as if it were being
// created now against all the others, the IPAddresses no ServiceCIDR contains, and how full each
// CIDR is. Pure: the command line fetches the cluster (or reads a dump) and prints the report.

import { gaps } from './coverage.ts'
import { decide } from './engine.ts'
import { allocatableRange, allocatableSize, familyWidth, type Family, type Prefix } from './ip.ts'
import { apiserverUsername, defaultServiceCIDRName, type ClusterView, type Decision, type IPAddressRecord, type Policy, type ServiceCIDRRecord, type UserInfo } from './types.ts'

export interface Utilisation {
  readonly cidr: Prefix
  /** Allocator-managed IPAddresses inside the CIDR's allocatable range. */
  readonly inUse: number
  /**
   * allocatableSize: what the allocator can hand out (network and IPv4 broadcast excluded; nothing
   * from an IPv6 CIDR shorter than /64, which the allocator refuses).
   */
  readonly usable: bigint
  /** inUse / usable in percent, rounded to one decimal; undefined when nothing is usable (IPv4 /31, /32, IPv6 shorter than /64). */
  readonly percent: number | undefined
}

export interface AuditedServiceCIDR {
  readonly record: ServiceCIDRRecord
  readonly decision: Decision
  readonly utilisation: readonly Utilisation[]
}

export interface AuditReport {
  /** In name order. */
  readonly serviceCIDRs: readonly AuditedServiceCIDR[]
  /** Allocator-managed IPAddresses that no ServiceCIDR contains: IPv4 first, each family in address order. */
  readonly orphans: readonly IPAddressRecord[]
}

/**
 * The cluster without one ServiceCIDR: what a CREATE of it would be checked against. A wrapper, not
 * a copy, so that auditing n ServiceCIDRs over m IPAddresses costs no n copies of the address index.
 */
export function viewWithout(view: ClusterView, name: string): ClusterView {
  return {
    *serviceCIDRs() {
      for (const record of view.serviceCIDRs()) if (record.name !== name) yield record
    },
    serviceCIDR: (other) => (other === name ? undefined : view.serviceCIDR(other)),
    cidrsOverlapping: (prefix) => view.cidrsOverlapping(prefix).filter((entry) => entry.record.name !== name),
    cidrsInOrder: (family) => view.cidrsInOrder(family).filter((entry) => entry.record.name !== name),
    pendingServiceCIDRs: () => view.pendingServiceCIDRs(),
    pendingServiceCIDRHolding: (other, cidrs) => view.pendingServiceCIDRHolding(other, cidrs),
    addressesBetween: (family, first, last) => view.addressesBetween(family, first, last),
    mislabelledAddresses: () => view.mislabelledAddresses(),
    occupiedBetween: (family, first, last) => view.occupiedBetween(family, first, last),
  }
}

/** Tenths of a percent, rounded half up, in bigint so that an IPv6 /64's size loses nothing. */
function percent(inUse: number, usable: bigint): number | undefined {
  if (usable === 0n) return undefined
  return Number((BigInt(inUse) * 1000n * 2n + usable) / (usable * 2n)) / 10
}

export function utilisation(view: ClusterView, cidr: Prefix): Utilisation {
  const { first, last } = allocatableRange(cidr)
  const inUse = last < first ? 0 : view.addressesBetween(cidr.family, first, last).length
  const usable = allocatableSize(cidr)
  return { cidr, inUse, usable, percent: percent(inUse, usable) }
}

/**
 * IPAddresses of one family outside every ServiceCIDR's allocatable range (PrefixContainsIP in
 * kubernetes pkg/api/servicecidr: network and IPv4 broadcast addresses are not contained), found
 * by walking the gaps between the ranges over the sorted address index: no scan of all addresses.
 */
function orphansOf(view: ClusterView, family: Family): IPAddressRecord[] {
  const covered = [...view.serviceCIDRs()].flatMap((record) =>
    record.cidrs.filter((cidr) => cidr.family === family).map((cidr) => ({ ...allocatableRange(cidr) })))
  const orphans: IPAddressRecord[] = []
  for (const gap of gaps({ first: 0n, last: (1n << BigInt(familyWidth(family))) - 1n }, covered)) {
    const found = view.addressesBetween(family, gap.first, gap.last)
    for (let i = 0; i < found.length; i++) orphans.push(found.at(i))
  }
  return orphans
}

/**
 * Audits every ServiceCIDR in `view`. Each is reviewed as a CREATE by `user` against the cluster
 * without it, so range rules and overlaps among existing ServiceCIDRs show; the apiserver's default
 * `kubernetes` ServiceCIDR is reviewed as kube-apiserver creates it (as system:apiserver), which the
 * engine exempts: its range comes from --service-cluster-ip-range, not from anyone the policy governs.
 */
export function auditCluster(policy: Policy, view: ClusterView, user: UserInfo): AuditReport {
  const records = [...view.serviceCIDRs()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  const serviceCIDRs = records.map((record): AuditedServiceCIDR => {
    const object = { name: record.name, cidrs: [...record.cidrs.map((cidr) => cidr.text), ...record.invalid] }
    const userInfo = record.name === defaultServiceCIDRName ? { username: apiserverUsername, groups: ['system:masters'] } : user
    const decision = decide(policy, viewWithout(view, record.name), {
      operation: 'CREATE',
      name: record.name,
      userInfo,
      object,
      oldObject: undefined,
      dryRun: true,
    })
    return { record, decision, utilisation: record.cidrs.map((cidr) => utilisation(view, cidr)) }
  })
  return { serviceCIDRs, orphans: [...orphansOf(view, 'IPv4'), ...orphansOf(view, 'IPv6')] }
}
