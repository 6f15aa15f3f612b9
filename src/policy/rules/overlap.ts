import { overlaps, type Prefix } from '../ip.ts'
import type { ServiceCIDRRecord } from '../types.ts'
import type { AdmitRule } from './rule.ts'

const shown = 3

function describe(record: ServiceCIDRRecord, prefix: Prefix, pending: boolean): string {
  const state = pending ? ', admitted moments ago' : record.deleting ? ', Terminating' : ''
  return `"${record.name}" (${prefix.text}${state})`
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
    if (policy.overlap === 'Allow') return []
    const pending = [...view.pendingServiceCIDRs()]
    return checked.flatMap(({ field, prefix }) => {
      const conflicts: string[] = []
      const consider = (record: ServiceCIDRRecord, existing: Prefix, isPending: boolean): void => {
        if (record.name === name) return
        if (policy.overlap === 'AllowExpansion' && prefix.bits < existing.bits) return
        conflicts.push(describe(record, existing, isPending))
      }
      for (const { record, prefix: existing } of view.cidrsOverlapping(prefix)) consider(record, existing, false)
      for (const record of pending) {
        for (const existing of record.cidrs) {
          if (overlaps(existing, prefix)) consider(record, existing, true)
        }
      }
      if (conflicts.length === 0) return []
      const listed = conflicts.slice(0, shown).join(', ')
      const more = conflicts.length > shown ? ` and ${conflicts.length - shown} more` : ''
      const expansion = policy.overlap === 'AllowExpansion' ? ' (a new range may only strictly contain existing ones)' : ''
      return [{
        rule: 'Overlap',
        field,
        message: `${field} ${prefix.text} overlaps ServiceCIDR${conflicts.length > 1 ? 's' : ''} ${listed}${more}${expansion}`,
      }]
    })
  },
}
