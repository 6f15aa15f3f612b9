// The vocabulary of the policy engine. Pure data: the engine imports nothing that does I/O.

import type { Family, Prefix } from './ip.ts'

export type OverlapMode = 'Deny' | 'AllowExpansion' | 'Allow'
export type Enforcement = 'Deny' | 'Warn' | 'Audit'

export interface PrefixBounds {
  readonly min: number
  readonly max: number
}

/** A validated policy (see src/config/policy.ts for the file format). */
export interface Policy {
  /** Absent: a ServiceCIDR may lie anywhere. */
  readonly allowedRanges: readonly Prefix[] | undefined
  readonly deniedRanges: readonly Prefix[]
  readonly overlap: OverlapMode
  readonly prefixLength: { readonly [F in Family]?: PrefixBounds }
  readonly deletion: { readonly requireUnused: boolean }
  readonly protectedNames: readonly string[]
  readonly exemptions: { readonly usernames: readonly string[], readonly groups: readonly string[] }
  readonly enforcement: Enforcement
  /** Warn (never deny) when fewer free Service addresses than this remain, per family. */
  readonly capacity: { readonly warnWhenFreeBelow: { readonly [F in Family]?: number } }
}

export interface ServiceCIDRRecord {
  readonly name: string
  /** The parsed CIDRs; a CIDR that does not parse is kept in `invalid` so nothing is silently lost. */
  readonly cidrs: readonly Prefix[]
  readonly invalid: readonly string[]
  /** metadata.deletionTimestamp is set: the ServiceCIDR is Terminating. */
  readonly deleting: boolean
}

export const managedByAllocator = 'ipallocator.k8s.io'

/** The ServiceCIDR kube-apiserver creates from --service-cluster-ip-range (defaultservicecidr). */
export const defaultServiceCIDRName = 'kubernetes'
export const apiserverUsername = 'system:apiserver'

export interface ParentRef {
  readonly group: string
  readonly resource: string
  readonly namespace: string
  readonly name: string
}

export interface IPAddressRecord {
  readonly name: string
  readonly family: Family
  readonly value: bigint
  /** The `ipaddress.kubernetes.io/ip-family` label, which canDeleteCIDR selects on. */
  readonly familyLabel: string | undefined
  /** `ipaddress.kubernetes.io/managed-by: ipallocator.k8s.io`: only these block a deletion. */
  readonly managed: boolean
  readonly parentRef: ParentRef | undefined
}

/** One CIDR of a ServiceCIDR. */
export interface PlacedCIDR {
  readonly record: ServiceCIDRRecord
  readonly prefix: Prefix
}

/** What the engine needs of the cluster: read-only, answered from memory. */
export interface ClusterView {
  serviceCIDRs(): Iterable<ServiceCIDRRecord>
  serviceCIDR(name: string): ServiceCIDRRecord | undefined
  /** The CIDRs of existing ServiceCIDRs that overlap `prefix`: containing it, equal to it, or inside it. */
  cidrsOverlapping(prefix: Prefix): readonly PlacedCIDR[]
  /** Every CIDR of the family, by first address (then prefix length). */
  cidrsInOrder(family: Family): readonly PlacedCIDR[]
  /**
   * ServiceCIDRs admitted moments ago whose creation the watch has not shown yet: by this process
   * (ClusterState.reserve), or by another replica (withReservations, src/policy/reservations.ts).
   * They take part in overlap checks (two overlapping CREATEs must not both pass) but never count as
   * covering addresses on DELETE, where guessing in favour of allowing would be unsafe.
   */
  pendingServiceCIDRs(): readonly ServiceCIDRRecord[]
  /**
   * A pending ServiceCIDR of that name holding every one of `cidrs` (as written), if there is one.
   * A name may be pending more than once: a CREATE retried under the same name with other CIDRs, or
   * two such CREATEs at once, are each pending until the watch shows which of them kube-apiserver
   * stored, since any of them may be the one.
   */
  pendingServiceCIDRHolding(name: string, cidrs: readonly string[]): ServiceCIDRRecord | undefined
  /**
   * Allocator-managed IPAddresses (labels managed-by: ipallocator.k8s.io and the ip-family of the
   * address) in [first, last] of the family, in address order: the ones canDeleteCIDR counts.
   */
  addressesBetween(family: Family, first: bigint, last: bigint): AddressRange
  /**
   * Allocator-managed IPAddresses whose ip-family label names the other family. The allocator never
   * writes one, so there are few (hand-made); addressesBetween leaves them out, but canDeleteCIDR
   * still lists one while checking a CIDR of the labelled family, and then looks its address up in
   * every CIDR: a dual-stack ServiceCIDR's deletion counts them.
   */
  mislabelledAddresses(): readonly IPAddressRecord[]
  /**
   * How many IPAddresses of the family, whatever their labels, are in [first, last]. Each takes its
   * address from the allocator, which skips every name its lister finds and takes an AlreadyExists
   * as ErrAllocated (allocateNextService, pkg/registry/core/service/ipallocator/ipallocator.go).
   */
  occupiedBetween(family: Family, first: bigint, last: bigint): number
  /**
   * Changes whenever the ServiceCIDRs the view holds change (added, updated or removed, as the watch
   * shows them); not for pending ones. Two reads of one view at the same revision hold the same
   * ServiceCIDRs. A view without it is never taken to be unchanged.
   */
  readonly revision?: number
}

export interface AddressRange {
  readonly length: number
  at(index: number): IPAddressRecord
  /** How many of the range lie in [first, last]; answered by binary search, not by a scan. */
  countBetween(first: bigint, last: bigint): number
}

export type Operation = 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT'

/** A Service CREATE or UPDATE, reviewed only to warn when Service addresses run low (capacity webhook). */
export interface ServiceReviewRequest {
  readonly operation: 'CREATE' | 'UPDATE'
  readonly namespace: string
  readonly name: string
  /** The families the Service takes ClusterIPs from; empty for headless and ExternalName; undefined: the cluster's default. */
  readonly families: readonly Family[] | undefined
  /**
   * An UPDATE only: the families the Service held before (the same conventions). It takes an
   * address only from those it did not hold: ExternalName to ClusterIP, single- to dual-stack.
   */
  readonly held?: readonly Family[] | undefined
}

export interface UserInfo {
  readonly username: string
  readonly groups: readonly string[]
}

/** A ServiceCIDR as admission carries it, reduced to what the policy reads. */
export interface ServiceCIDRObject {
  readonly name: string
  readonly cidrs: readonly string[]
}

export interface ReviewRequest {
  readonly operation: Operation
  readonly name: string
  readonly userInfo: UserInfo
  readonly object: ServiceCIDRObject | undefined
  readonly oldObject: ServiceCIDRObject | undefined
  readonly dryRun: boolean
}

export type RuleName =
  | 'ValidCIDR'
  | 'ValidName'
  | 'AllowedRanges'
  | 'DeniedRanges'
  | 'PrefixLength'
  | 'Overlap'
  | 'InUse'
  | 'ProtectedName'
  | 'ClusterStateUnknown'
  | 'OverlapUnconfirmed'

export interface Violation {
  readonly rule: RuleName
  /** Field path in the ServiceCIDR, as Kubernetes writes it: spec.cidrs[1]. */
  readonly field: string
  readonly message: string
}

/** Why a request was allowed without running the rules. */
export type Bypass = 'ApiserverDefault' | 'Exempt' | 'MetadataOnly' | 'NothingToCheck'

export interface Decision {
  readonly allowed: boolean
  /** Every rule that failed, whatever the enforcement mode. */
  readonly violations: readonly Violation[]
  /** Shown to the client as admission warnings. */
  readonly warnings: readonly string[]
  /** The message a denied request carries; empty when allowed. */
  readonly message: string
  readonly bypass: Bypass | undefined
  /** CIDRs checked: those the request creates or adds, or those it deletes. */
  readonly cidrs: readonly string[]
}
