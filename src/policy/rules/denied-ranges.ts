import { overlaps } from '../ip.ts'
import type { AdmitRule } from './rule.ts'

/** spec.deniedRanges: no CIDR may overlap them (pod, node and VPC ranges). */
export const deniedRanges: AdmitRule = {
  name: 'DeniedRanges',
  needsState: () => false,
  check({ policy, checked }) {
    return checked.flatMap(({ field, prefix }) => {
      const hit = policy.deniedRanges.filter((range) => overlaps(range, prefix)).map((range) => range.text)
      if (hit.length === 0) return []
      return [{ rule: 'DeniedRanges', field, message: `${field} ${prefix.text} overlaps the denied range${hit.length > 1 ? 's' : ''} ${hit.join(', ')}` }]
    })
  },
}
