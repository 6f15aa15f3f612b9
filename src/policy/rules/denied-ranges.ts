import { overlaps } from '../ip.ts'
import type { Violation } from '../types.ts'
import type { AdmitRule } from './rule.ts'

/** spec.deniedRanges: no CIDR may overlap them (pod, node and VPC ranges). */
export const deniedRanges: AdmitRule = {
  name: 'DeniedRanges',
  needsState: () => false,
  check({ policy, checked }) {
    // Loops rather than flatMap, filter and map: this runs for every CREATE, and allocates only what
    // it reports.
    const violations: Violation[] = []
    for (const { field, prefix } of checked) {
      if (!policy.deniedRanges.some((range) => overlaps(range, prefix))) continue
      const hit = policy.deniedRanges.filter((range) => overlaps(range, prefix)).map((range) => range.text)
      violations.push({ rule: 'DeniedRanges', field, message: `${field} ${prefix.text} overlaps the denied range${hit.length > 1 ? 's' : ''} ${hit.join(', ')}` })
    }
    return violations
  },
}
