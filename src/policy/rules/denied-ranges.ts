import { overlaps, type Prefix } from '../ip.ts'
import type { Violation } from '../types.ts'
import { noViolations, type AdmitRule } from './rule.ts'

function overlapsAny(ranges: readonly Prefix[], prefix: Prefix): boolean {
  for (const range of ranges) {
    if (overlaps(range, prefix)) return true
  }
  return false
}

/** spec.deniedRanges: no CIDR may overlap them (pod, node and VPC ranges). */
export const deniedRanges: AdmitRule = {
  name: 'DeniedRanges',
  needsState: () => false,
  check({ policy, checked }) {
    // Loops rather than some, flatMap, filter and map: this runs for every CREATE, and allocates only
    // what it reports.
    let violations: Violation[] | undefined
    for (const { field, prefix } of checked) {
      if (!overlapsAny(policy.deniedRanges, prefix)) continue
      const hit = policy.deniedRanges.filter((range) => overlaps(range, prefix)).map((range) => range.text)
      ;(violations ??= []).push({ rule: 'DeniedRanges', field, message: `${field} ${prefix.text} overlaps the denied range${hit.length > 1 ? 's' : ''} ${hit.join(', ')}` })
    }
    return violations ?? noViolations
  },
}
