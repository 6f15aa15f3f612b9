import type { AdmitRule } from './rule.ts'

/** spec.prefixLength: optional bounds on each family's prefix length. */
export const prefixLength: AdmitRule = {
  name: 'PrefixLength',
  needsState: () => false,
  check({ policy, checked }) {
    return checked.flatMap(({ field, prefix }) => {
      const bounds = policy.prefixLength[prefix.family]
      if (bounds === undefined) return []
      const { bits, family, text } = prefix
      if (bits < bounds.min) {
        return [{ rule: 'PrefixLength', field, message: `${field} ${text} is too large: the policy allows ${family} prefixes from /${bounds.min} to /${bounds.max}` }]
      }
      if (bits > bounds.max) {
        return [{ rule: 'PrefixLength', field, message: `${field} ${text} is too small: the policy allows ${family} prefixes from /${bounds.min} to /${bounds.max}` }]
      }
      return []
    })
  },
}
