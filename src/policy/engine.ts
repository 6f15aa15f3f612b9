// The heart of servicecidr-guard: (policy, cluster view, request) -> decision. Pure: no I/O, no
// clock, no logger. The webhook and the command line both call `decide`, so they cannot disagree.

import { capacityWarnings } from './capacity.ts'
import { shortestIPv6ServiceCIDR } from './ip.ts'
import { findFreePrefix } from './plan.ts'
import { allowedRanges } from './rules/allowed-ranges.ts'
import { deniedRanges } from './rules/denied-ranges.ts'
import { inUse } from './rules/in-use.ts'
import { overlap } from './rules/overlap.ts'
import { prefixLength } from './rules/prefix-length.ts'
import { protectedNames } from './rules/protected-names.ts'
import type { AdmitRule, CheckedCIDR, DeleteRule } from './rules/rule.ts'
import { validateName, validateSpec, validateUpdate } from './rules/valid-cidrs.ts'
import { requestedServiceCIDR } from './state.ts'
import { apiserverUsername, defaultServiceCIDRName, type Bypass, type ClusterView, type Decision, type Policy, type ReviewRequest, type ServiceCIDRRecord, type ServiceReviewRequest, type Violation } from './types.ts'

export const admitRules: readonly AdmitRule[] = [allowedRanges, deniedRanges, prefixLength, overlap]
export const deleteRules: readonly DeleteRule[] = [protectedNames, inUse]

/** Rules whose failure a suggested free range could fix. */
const fixableByAnotherRange = new Set<Violation['rule']>(['AllowedRanges', 'DeniedRanges', 'Overlap', 'PrefixLength'])

const stateUnknown = (field: string): Violation => ({
  rule: 'ClusterStateUnknown',
  field,
  message: 'servicecidr-guard has not finished reading the cluster\'s ServiceCIDRs and IPAddresses, so it cannot check this safely yet; retry in a few seconds',
})

/** The warnings of a decision that has none: one frozen array for all of them (see noViolations). */
const noWarnings: readonly string[] = Object.freeze([])

function allow(bypass: Bypass, cidrs: readonly string[] = []): Decision {
  return { allowed: true, violations: [], warnings: noWarnings, message: '', bypass, cidrs }
}

function exempt(policy: Policy, request: ReviewRequest): boolean {
  const { usernames, groups } = policy.exemptions
  if (usernames.includes(request.userInfo.username)) return true
  // A loop rather than some: this runs for every review, and a closure a call was garbage.
  for (const group of request.userInfo.groups) {
    if (groups.includes(group)) return true
  }
  return false
}

/** The violations' messages as a denial's message gives them (and the decision log's reason, and the CLI's reports). */
export function violationMessages(violations: readonly Violation[]): string {
  return violations.map((violation) => violation.message).join('; ')
}

/**
 * Applies spec.enforcement to the violations found. A ValidCIDR or ValidName violation is
 * kube-apiserver's own validation (validateServiceCIDRSpec, ValidateServiceCIDRUpdate, the name
 * check of ValidateServiceCIDR), which refuses the object whatever this policy's enforcement: Warn
 * and Audit never let it through. The webhook never meets one (the apiserver validates before
 * admission); offline checks of manifests do.
 */
function enforce(policy: Policy, subject: string, violations: Violation[], cidrs: readonly string[], hint: string): Decision {
  if (violations.length === 0) return { allowed: true, violations, warnings: noWarnings, message: '', bypass: undefined, cidrs }
  const reasons = violationMessages(violations)
  const message = `${subject} is not allowed by the servicecidr-guard policy: ${reasons}.${hint}`
  const invalid = violations.some((violation) => violation.rule === 'ValidCIDR' || violation.rule === 'ValidName')
  switch (invalid ? 'Deny' : policy.enforcement) {
    case 'Deny':
      return { allowed: false, violations, warnings: noWarnings, message, bypass: undefined, cidrs }
    case 'Warn':
      return { allowed: true, violations, warnings: violations.map((violation) => `servicecidr-guard (Warn): ${violation.message}`), message: '', bypass: undefined, cidrs }
    case 'Audit':
      return { allowed: true, violations, warnings: noWarnings, message: '', bypass: undefined, cidrs }
  }
}

/** One sentence naming a free range that would pass, for the first CIDR that another range would fix. */
function suggestion(policy: Policy, view: ClusterView | undefined, checked: readonly CheckedCIDR[], violations: readonly Violation[]): string {
  if (view === undefined) return ''
  for (const { field, prefix } of checked) {
    if (!violations.some((violation) => violation.field === field && fixableByAnotherRange.has(violation.rule))) continue
    // The same size, within the policy's bounds, and never an IPv6 range the allocator refuses.
    const bounds = policy.prefixLength[prefix.family]
    const wanted = prefix.family === 'IPv6' ? Math.max(prefix.bits, shortestIPv6ServiceCIDR) : prefix.bits
    const bits = bounds === undefined ? wanted : Math.min(Math.max(wanted, bounds.min), bounds.max)
    // Bounds that end short of /64 leave no IPv6 range the allocator takes: not a lack of room.
    if (prefix.family === 'IPv6' && bits < shortestIPv6ServiceCIDR) {
      return ` The policy admits IPv6 prefixes of /${String(bounds?.min)} to /${String(bounds?.max)} only, all shorter than the /${String(shortestIPv6ServiceCIDR)} kube-apiserver's allocator takes addresses from; ask the platform team to admit /${String(shortestIPv6ServiceCIDR)} or longer.`
    }
    const free = findFreePrefix(policy, view, prefix.family, bits)
    return free === undefined
      ? ` No free ${prefix.family} /${bits} is left that the policy admits; ask the platform team for more room.`
      : ` ${free.text} is free and the policy admits it.`
  }
  return ''
}

/**
 * Checks spec.cidrs from index firstAdded on: a CREATE adds every CIDR it names (0), an UPDATE
 * that gains a second family adds spec.cidrs[1]. What is added is told by position, not by text:
 * an UPDATE from [a] to [a, a] adds a second a, which validateSpec refuses as upstream does.
 */
function admit(policy: Policy, view: ClusterView | undefined, name: string, cidrs: readonly string[], firstAdded: number): Decision {
  const spec = validateSpec(cidrs)
  const added = firstAdded === 0 ? cidrs : cidrs.slice(firstAdded)
  // For a CREATE all of spec counts, and no set of the added fields is built for each review.
  const addedFields = firstAdded === 0 ? undefined : new Set(added.map((_, index) => `spec.cidrs[${firstAdded + index}]`))
  const checked = addedFields === undefined ? spec.parsed : spec.parsed.filter(({ field }) => addedFields.has(field))
  const violations = addedFields === undefined ? spec.violations : spec.violations.filter(({ field }) => field === 'spec.cidrs' || addedFields.has(field))
  // A CREATE's name is checked too, before its spec, as ValidateServiceCIDR does; an UPDATE's cannot change.
  if (addedFields === undefined) {
    const invalidName = validateName(name)
    if (invalidName.length > 0) violations.unshift(...invalidName)
  }
  const context = { policy, name, checked }
  for (const rule of admitRules) {
    if (view === undefined && rule.needsState(policy)) {
      if (checked.length > 0) violations.push(stateUnknown('spec.cidrs'))
      continue
    }
    const found = rule.check(context, view as ClusterView)
    if (found.length > 0) violations.push(...found)
  }
  // Admitted, the usual case: no message, so neither its subject nor a suggestion is written.
  if (violations.length === 0) return enforce(policy, '', violations, added, '')
  return enforce(policy, `ServiceCIDR "${name}"`, violations, added, suggestion(policy, view, checked, violations))
}

function remove(policy: Policy, view: ClusterView | undefined, target: ServiceCIDRRecord): Decision {
  const violations: Violation[] = []
  const context = { policy, target }
  for (const rule of deleteRules) {
    if (view === undefined && rule.needsState(policy)) {
      violations.push(stateUnknown('metadata.name'))
      continue
    }
    violations.push(...rule.check(context, view as ClusterView))
  }
  const cidrs = target.cidrs.map((prefix) => prefix.text)
  const decision = enforce(policy, `Deleting ServiceCIDR "${target.name}"`, violations, cidrs, '')
  if (!decision.allowed || view === undefined) return decision
  const warnings = capacityWarnings(policy, view, target.cidrs.map((prefix) => prefix.family), target.name)
  return warnings.length === 0 ? decision : { ...decision, warnings: [...decision.warnings, ...warnings] }
}

/**
 * A Service CREATE, or an UPDATE that may take a new address, sent only if the optional capacity
 * webhook is installed: always allowed (it must never stand between a team and its Service), with
 * a warning when addresses run low in a family the Service takes one from.
 */
export function decideService(policy: Policy, view: ClusterView | undefined, request: ServiceReviewRequest): Decision {
  // The cluster's default family is the first of the ServiceCIDR kube-apiserver made from
  // --service-cluster-ip-range.
  const primary = view?.serviceCIDR(defaultServiceCIDRName)?.cidrs[0]?.family ?? 'IPv4'
  const taken = request.families ?? [primary]
  // An UPDATE allocates only in the families the Service did not hold: all of them from
  // ExternalName, the second one from single- to dual-stack (updateClusterIPs,
  // pkg/registry/core/service/storage/alloc.go).
  const held = request.operation === 'UPDATE' ? request.held ?? [primary] : []
  const families = taken.filter((family) => !held.includes(family))
  const warnings = view === undefined ? [] : capacityWarnings(policy, view, families)
  return { allowed: true, violations: [], warnings, message: '', bypass: 'NothingToCheck', cidrs: [] }
}

/**
 * An admitted CREATE or UPDATE whose range could not be recorded where every replica checks for
 * overlaps (`detail` says why). Without that record another replica may admit an overlapping range
 * at the same moment, so the admission is not confirmed, and spec.enforcement says what that means:
 * Deny refuses it and says to retry; Warn admits it with a warning; Audit admits it and records the
 * violation. An exempt request stays admitted, with the violation recorded for the audit log.
 */
export function unconfirmed(policy: Policy, admitted: Decision, name: string, detail: string): Decision {
  const violation: Violation = {
    rule: 'OverlapUnconfirmed',
    field: 'spec.cidrs',
    message: `the overlap check across the webhook's replicas could not be completed: ${detail}`,
  }
  const violations = [...admitted.violations, violation]
  if (admitted.bypass === 'Exempt') return { ...admitted, violations }
  switch (policy.enforcement) {
    case 'Deny':
      return {
        allowed: false,
        violations,
        warnings: [],
        message: `ServiceCIDR "${name}" was not admitted: ${violation.message}. Nothing was created; retry in a few seconds, and if this keeps happening, ask your platform team to check the servicecidr-guard webhook.`,
        bypass: undefined,
        cidrs: admitted.cidrs,
      }
    case 'Warn':
      return { ...admitted, violations, warnings: [...admitted.warnings, `servicecidr-guard (Warn): ${violation.message}; another replica may have admitted an overlapping range at the same moment`] }
    case 'Audit':
      return { ...admitted, violations }
  }
}

/**
 * Decides one admission request. `view` is undefined while the cluster state is not known (the
 * watches have not synced): rules that need it then fail closed under enforcement Deny.
 */
export function decide(policy: Policy, view: ClusterView | undefined, request: ReviewRequest): Decision {
  const { operation, name, object, oldObject, userInfo } = request

  // kube-apiserver creates and re-syncs its own default ServiceCIDR; refusing it keeps the
  // apiserver from ever becoming ready (pkg/controlplane/controller/defaultservicecidr).
  if (name === defaultServiceCIDRName && userInfo.username === apiserverUsername && operation !== 'DELETE') {
    return allow('ApiserverDefault', object?.cidrs)
  }
  if (exempt(policy, request)) return allow('Exempt', object?.cidrs ?? oldObject?.cidrs)

  switch (operation) {
    case 'CREATE':
      if (object === undefined) return enforce(policy, `ServiceCIDR "${name}"`, [{ rule: 'ValidCIDR', field: 'object', message: 'the request carries no object' }], [], '')
      return admit(policy, view, name, object.cidrs, 0)
    case 'UPDATE': {
      if (object === undefined || oldObject === undefined) {
        return enforce(policy, `ServiceCIDR "${name}"`, [{ rule: 'ValidCIDR', field: 'object', message: 'the UPDATE request carries no object or no oldObject' }], [], '')
      }
      // CIDRs are immutable except that a single-CIDR ServiceCIDR may gain the other family
      // (ValidateServiceCIDRUpdate, https://issues.k8s.io/131261): only what is added is checked,
      // and the whole new spec is validated as upstream's validateServiceCIDRSpec does then.
      // Metadata-only updates, such as kube-controller-manager's finalizer patches, always pass:
      // refusing them would leave a ServiceCIDR Terminating forever.
      const changed = validateUpdate(oldObject.cidrs, object.cidrs)
      if (changed.length > 0) return enforce(policy, `ServiceCIDR "${name}"`, changed, object.cidrs, '')
      if (object.cidrs.length === oldObject.cidrs.length) return allow('MetadataOnly')
      return admit(policy, view, name, object.cidrs, oldObject.cidrs.length)
    }
    case 'DELETE': {
      // kube-apiserver sends the object being deleted as oldObject; fall back to the cache. One with
      // no CIDR that parses is no better than none: read as the target, it covered no address, and
      // the in-use check passed whatever the range held.
      const sent = oldObject && requestedServiceCIDR(name, oldObject.cidrs)
      const target = sent !== undefined && sent.cidrs.length > 0 ? sent : view?.serviceCIDR(name)
      if (target === undefined) {
        const violation = view === undefined ? stateUnknown('oldObject') : { rule: 'ClusterStateUnknown' as const, field: 'oldObject', message: 'the DELETE request carries no oldObject with a valid CIDR and the ServiceCIDR is not in the cache' }
        return enforce(policy, `Deleting ServiceCIDR "${name}"`, [violation], [], '')
      }
      return remove(policy, view, target)
    }
    case 'CONNECT':
      return allow('NothingToCheck')
  }
}
