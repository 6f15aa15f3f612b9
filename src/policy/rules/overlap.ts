import { overlaps, type Prefix } from '../ip.ts'
import type { Policy, ServiceCIDRRecord, Violation } from '../types.ts'
import { noViolations, type AdmitRule } from './rule.ts'

const shown = 3

function describe(record: ServiceCIDRRecord, prefix: Prefix, pending: boolean): string {
  const state = pending ? ', admitted moments ago' : record.deleting ? ', Terminating' : ''
  return `"${record.name}" (${prefix.text}${state})`
}

/**
 * Whether `existing`, which overlaps the new `prefix`, is a conflict: not when it is the
 * ServiceCIDR's own (old) version, nor under AllowExpansion when the new range strictly contains it.
 */
function isConflict(policy: Policy, name: string, prefix: Prefix, record: ServiceCIDRRecord, existing: Prefix): boolean {
  if (record.name === name) return false
  return !(policy.overlap === 'AllowExpansion' && prefix.bits < existing.bits)
}

/**
 * spec.overlap. Kubernetes accepts overlapping ServiceCIDRs by design (OverlapsPrefix in
 * pkg/api/servicecidr/servicecidr.go only reports them). Deny refuses any overlap; AllowExpansion
 * lets a new CIDR strictly contain existing ones, the documented way to grow a range; Allow is
 * Kubernetes' own behaviour. A ServiceCIDR never overlaps its own old version; Terminating and
 * just-admitted ServiceCIDRs count.
 */
export const overlap: AdmitRule = {
  name: 'Overlap',
  needsState: (policy) => policy.overlap !== 'Allow',
  check({ policy, name, checked }, view) {
    if (policy.overlap === 'Allow') return noViolations
    // Loops rather than flatMap and spreads: this runs for every CREATE, and allocates only what it
    // reports.
    let violations: Violation[] | undefined
    const pending = view.pendingServiceCIDRs()
    for (const { field, prefix } of checked) {
      let conflicts: string[] | undefined
      for (const { record, prefix: existing } of view.cidrsOverlapping(prefix)) {
        if (isConflict(policy, name, prefix, record, existing)) (conflicts ??= []).push(describe(record, existing, false))
      }
      for (const record of pending) {
        for (const existing of record.cidrs) {
          if (overlaps(existing, prefix) && isConflict(policy, name, prefix, record, existing)) (conflicts ??= []).push(describe(record, existing, true))
        }
      }
      if (conflicts === undefined) continue
      const listed = conflicts.slice(0, shown).join(', ')
      const more = conflicts.length > shown ? ` and ${conflicts.length - shown} more` : ''
      const expansion = policy.overlap === 'AllowExpansion' ? ' (a new range may only strictly contain existing ones)' : ''
      ;(violations ??= []).push({
        rule: 'Overlap',
        field,
        message: `${field} ${prefix.text} overlaps ServiceCIDR${conflicts.length > 1 ? 's' : ''} ${listed}${more}${expansion}`,
      })
    }
    return violations ?? noViolations
  },
}
