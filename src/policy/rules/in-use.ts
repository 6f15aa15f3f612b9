import { orphanedAddresses } from '../coverage.ts'
import { defaultServiceCIDRName, type IPAddressRecord, type Policy } from '../types.ts'
import type { DeleteRule } from './rule.ts'

/** Who holds an address, for messages: "Service default/web (10.96.0.10)". */
export function holder(address: IPAddressRecord): string {
  const parent = address.parentRef
  if (parent === undefined) return `IPAddress ${address.name}`
  const kind = parent.resource === 'services' && parent.group === '' ? 'Service' : `${parent.resource}${parent.group ? `.${parent.group}` : ''}`
  const namespaced = parent.namespace ? `${parent.namespace}/${parent.name}` : parent.name
  return `${kind} ${namespaced} (${address.name})`
}

const deleteServices = 'delete those Services (and re-create them once the range is gone)'

/**
 * What moves the addresses off `ranges` (the target's CIDRs that hold them), as far as the policy
 * admits it. Another ServiceCIDR covers an address only if its prefix overlaps the target's and is
 * no longer (ContainsAddress and ContainsPrefix, pkg/api/servicecidr/servicecidr.go, v1.34.4), so
 * it overlaps the target: under Deny no such CREATE is admitted, and under AllowExpansion only one
 * that strictly contains the target's range.
 */
function remedy(overlap: Policy['overlap'], ranges: string): string {
  switch (overlap) {
    case 'Allow':
      return `${deleteServices}, or create a ServiceCIDR that covers ${ranges}`
    case 'AllowExpansion':
      return `${deleteServices}, or create a ServiceCIDR that strictly contains ${ranges} (a shorter prefix: the policy admits an overlap only as such an expansion)`
    case 'Deny':
      return "delete those Services and re-create them once the range is gone (no ServiceCIDR can cover them instead: it would overlap this one, which the policy's overlap: Deny refuses)"
  }
}

/**
 * The default ServiceCIDR is kube-apiserver's, made from its --service-cluster-ip-range, and
 * kube-apiserver re-creates Service default/kubernetes at that range's first address: deleting the
 * Services moves nothing until the flag changes.
 */
function defaultRemedy(ranges: string): string {
  return `change --service-cluster-ip-range on every kube-apiserver to a range another ServiceCIDR holds (this is kube-apiserver's default ServiceCIDR, made from that flag, and it re-creates Service default/kubernetes in it), then delete the Services left in ${ranges}`
}

/** What `leaving` names (coverage.ts), as the message says it. */
function alsoLeaving(names: readonly string[]): string {
  if (names.length === 0) return ''
  const quoted = names.map((name) => `"${name}"`).join(', ')
  return ` (ServiceCIDR ${quoted} ${names.length === 1 ? 'is' : 'are'} being deleted too, so ${names.length === 1 ? 'it does' : 'they do'} not count)`
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
    const { count, sample, blocked, leaving } = orphanedAddresses(view, target)
    if (count === 0) return []
    const listed = sample.map(holder).join(', ')
    const more = count > sample.length ? ` and ${count - sample.length} more` : ''
    const ranges = blocked.map((prefix) => prefix.text).join(' and ')
    const next = target.name === defaultServiceCIDRName ? defaultRemedy(ranges) : remedy(policy.overlap, ranges)
    return [{
      rule: 'InUse',
      field: 'metadata.name',
      message:
        `ServiceCIDR "${target.name}" still has ${count} allocated address${count === 1 ? '' : 'es'} that no other ServiceCIDR covers: ${listed}${more}${alsoLeaving(leaving)}. ` +
        `Move them off it first: ${next}; then delete again. ` +
        'Until then Kubernetes would keep the ServiceCIDR Terminating',
    }]
  },
}
