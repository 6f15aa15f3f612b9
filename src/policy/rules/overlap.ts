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
    const others = [
      ...[...view.serviceCIDRs()].map((record) => ({ record, pending: false })),
      ...[...view.pendingServiceCIDRs()].map((record) => ({ record, pending: true })),
    ].filter(({ record }) => record.name !== name)
    return checked.flatMap(({ field, prefix }) => {
      const conflicts: string[] = []
      for (const { record, pending } of others) {
        for (const existing of record.cidrs) {
          if (!overlaps(existing, prefix)) continue
          if (policy.overlap === 'AllowExpansion' && prefix.bits < existing.bits) continue
          conflicts.push(describe(record, existing, pending))
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
