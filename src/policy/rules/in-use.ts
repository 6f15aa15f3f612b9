import { orphanedAddresses } from '../coverage.ts'
import type { IPAddressRecord } from '../types.ts'
import type { DeleteRule } from './rule.ts'

/** Who holds an address, for messages: "Service default/web (10.96.0.10)". */
export function holder(address: IPAddressRecord): string {
  const parent = address.parentRef
  if (parent === undefined) return `IPAddress ${address.name}`
  const kind = parent.resource === 'services' && parent.group === '' ? 'Service' : `${parent.resource}${parent.group ? `.${parent.group}` : ''}`
  const namespaced = parent.namespace ? `${parent.namespace}/${parent.name}` : parent.name
  return `${kind} ${namespaced} (${address.name})`
}

/**
 * spec.deletion.requireUnused: refuse a DELETE that kube-controller-manager would leave hanging in
 * Terminating because Services still hold addresses only this ServiceCIDR contains (canDeleteCIDR).
 */
export const inUse: DeleteRule = {
  name: 'InUse',
  needsState: (policy) => policy.deletion.requireUnused,
  check({ policy, target }, view) {
    if (!policy.deletion.requireUnused) return []
    const { count, sample, blocked } = orphanedAddresses(view, target)
    if (count === 0) return []
    const listed = sample.map(holder).join(', ')
    const more = count > sample.length ? ` and ${count - sample.length} more` : ''
    const ranges = blocked.map((prefix) => prefix.text).join(' and ')
    return [{
      rule: 'InUse',
      field: 'metadata.name',
      message:
        `ServiceCIDR "${target.name}" still has ${count} allocated address${count === 1 ? '' : 'es'} that no other ServiceCIDR covers: ${listed}${more}. ` +
        `Move them off it first: delete those Services (and re-create them once the range is gone), or create a ServiceCIDR that covers ${ranges}; then delete again. ` +
        'Until then Kubernetes would keep the ServiceCIDR Terminating',
    }]
  },
}
