import type { Violation } from '../types.ts'
import { noViolations, type AdmitRule } from './rule.ts'

/** spec.prefixLength: optional bounds on each family's prefix length. */
export const prefixLength: AdmitRule = {
  name: 'PrefixLength',
  needsState: () => false,
  check({ policy, checked }) {
    // A loop rather than flatMap: this runs for every CREATE, and allocates only what it reports.
    let violations: Violation[] | undefined
    for (const { field, prefix } of checked) {
      const bounds = policy.prefixLength[prefix.family]
      if (bounds === undefined || (prefix.bits >= bounds.min && prefix.bits <= bounds.max)) continue
      const { bits, family, text } = prefix
      const size = bits < bounds.min ? 'too large' : 'too small'
      ;(violations ??= []).push({ rule: 'PrefixLength', field, message: `${field} ${text} is ${size}: the policy allows ${family} prefixes from /${bounds.min} to /${bounds.max}` })
    }
    return violations ?? noViolations
  },
}
