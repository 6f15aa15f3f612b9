import { containsPrefix, type Prefix } from '../ip.ts'
import type { Violation } from '../types.ts'
import { noViolations, type AdmitRule } from './rule.ts'

function insideAny(ranges: readonly Prefix[], prefix: Prefix): boolean {
  for (const range of ranges) {
    if (containsPrefix(range, prefix)) return true
  }
  return false
}

/** spec.allowedRanges: every CIDR must lie inside one of them (GKE beta: 34.118.224.0/20). */
export const allowedRanges: AdmitRule = {
  name: 'AllowedRanges',
  needsState: () => false,
  check({ policy, checked }) {
    const allowed = policy.allowedRanges
    if (allowed === undefined) return noViolations
    // Loops rather than some, filter and map: this runs for every CREATE, and allocates only what it
    // reports.
    let violations: Violation[] | undefined
    for (const { field, prefix } of checked) {
      if (insideAny(allowed, prefix)) continue
      const sameFamily = allowed.filter((range) => range.family === prefix.family).map((range) => range.text)
      const where = sameFamily.length > 0
        ? `outside the allowed ${prefix.family} ranges (${sameFamily.join(', ')})`
        : `an ${prefix.family} range, and the policy allows no ${prefix.family} ranges`
      ;(violations ??= []).push({ rule: 'AllowedRanges', field, message: `${field} ${prefix.text} is ${where}` })
    }
    return violations ?? noViolations
  },
}
