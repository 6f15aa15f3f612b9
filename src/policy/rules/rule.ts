// The shape every rule has. One rule, one file; the engine runs them all and keeps every violation.

import type { Prefix } from '../ip.ts'
import type { ClusterView, Policy, ServiceCIDRRecord, Violation } from '../types.ts'

/** A CIDR that a CREATE or UPDATE brings in, with its place in spec.cidrs. */
export interface CheckedCIDR {
  readonly field: string
  readonly prefix: Prefix
}

export interface AdmitContext {
  readonly policy: Policy
  /** The ServiceCIDR's name: its own (old) version never conflicts with it. */
  readonly name: string
  readonly checked: readonly CheckedCIDR[]
}

export interface DeleteContext {
  readonly policy: Policy
  readonly target: ServiceCIDRRecord
}

/** A rule over CIDRs a request brings in. `view` is present only for rules that declare needsState. */
export interface AdmitRule {
  readonly name: Violation['rule']
  readonly needsState: boolean
  check(context: AdmitContext, view: ClusterView): Violation[]
}

export interface DeleteRule {
  readonly name: Violation['rule']
  readonly needsState: boolean
  check(context: DeleteContext, view: ClusterView): Violation[]
}
