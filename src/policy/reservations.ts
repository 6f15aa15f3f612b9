// Ranges other replicas have admitted moments ago, as the engine sees them: extra pending
// ServiceCIDRs on top of a cluster view. Pure: the caller reads them from wherever they are shared
// and passes them in, so `decide` stays a function of its arguments.

import type { AddressRange, ClusterView, PlacedCIDR, ServiceCIDRRecord } from './types.ts'

/** Whether the view already holds a ServiceCIDR of that name with every CIDR of `record`. */
function shownBy(view: ClusterView, record: ServiceCIDRRecord): boolean {
  const held = view.serviceCIDR(record.name)
  return held !== undefined && record.cidrs.every((prefix) => held.cidrs.some((cidr) => cidr.text === prefix.text))
}

/**
 * The view with `reservations` added to its pending ServiceCIDRs, so the overlap rule counts them.
 * A reservation ends, for this view, once the view holds its ServiceCIDR with those CIDRs (the
 * watch has shown it; the ServiceCIDR itself then counts), and one already pending here under the
 * same name is not counted twice.
 */
export function withReservations(view: ClusterView, reservations: Iterable<ServiceCIDRRecord>): ClusterView {
  const own = [...view.pendingServiceCIDRs()]
  const names = new Set(own.map((record) => record.name))
  const extra = [...reservations].filter((record) => !names.has(record.name) && !shownBy(view, record))
  if (extra.length === 0) return view
  const pending = [...own, ...extra]
  return {
    serviceCIDRs: () => view.serviceCIDRs(),
    serviceCIDR: (name: string) => view.serviceCIDR(name),
    cidrsOverlapping: (prefix): readonly PlacedCIDR[] => view.cidrsOverlapping(prefix),
    cidrsInOrder: (family): readonly PlacedCIDR[] => view.cidrsInOrder(family),
    pendingServiceCIDRs: () => pending,
    addressesBetween: (family, first, last): AddressRange => view.addressesBetween(family, first, last),
  }
}
