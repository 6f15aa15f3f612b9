import type { DeleteRule } from './rule.ts'

/** spec.protectedNames: ServiceCIDRs that may never be deleted. */
export const protectedNames: DeleteRule = {
  name: 'ProtectedName',
  needsState: () => false,
  check({ policy, target }) {
    if (!policy.protectedNames.includes(target.name)) return []
    return [{
      rule: 'ProtectedName',
      field: 'metadata.name',
      message: `ServiceCIDR "${target.name}" is protected by the policy (spec.protectedNames) and may not be deleted; ask the platform team to change the policy if it really must go`,
    }]
  },
}
