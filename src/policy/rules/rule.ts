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

/**
 * A rule over CIDRs a request brings in. `view` is present only when needsState says, for this
 * policy, that the rule reads it; while the cluster state is unknown such a rule fails closed and
 * the others still run.
 */
export interface AdmitRule {
  readonly name: Violation['rule']
  needsState(policy: Policy): boolean
  check(context: AdmitContext, view: ClusterView): readonly Violation[]
}

/**
 * What a rule finds in a request it has nothing against: one frozen array for every such answer.
 * The admit rules run for every CREATE and most find nothing; an array of their own for each was
 * garbage a review (docs/benchmarks.md, "Thirty-fourth pass").
 */
export const noViolations: readonly Violation[] = Object.freeze([])

/** A rule over the ServiceCIDR a DELETE removes; `view` as for AdmitRule. */
export interface DeleteRule {
  readonly name: Violation['rule']
  needsState(policy: Policy): boolean
  check(context: DeleteContext, view: ClusterView): Violation[]
}
