// Ranges other replicas have admitted moments ago, as the engine sees them: extra pending
// ServiceCIDRs on top of a cluster view. Pure: the caller reads them from wherever they are shared
// and passes them in, so `decide` stays a function of its arguments.

import { holdsCIDRs, requestedServiceCIDR } from './state.ts'
import type { AddressRange, ClusterView, PlacedCIDR, ServiceCIDRRecord } from './types.ts'

/**
 * A range another replica (or this one) admitted moments ago, as the shared reservations hold it:
 * a ServiceCIDR's name and its CIDRs as written.
 */
export interface ReservedRange {
  readonly name: string
  readonly cidrs: readonly string[]
}

/**
 * The view with `reservations` added to its pending ServiceCIDRs, so the overlap rule counts them.
 * A reservation ends, for this view, once the view holds its ServiceCIDR with those CIDRs (the
 * watch has shown it; the ServiceCIDR itself then counts), and one already pending here with those
 * CIDRs is not counted twice. One pending here under the same name with other CIDRs does not hide
 * it: of two CREATEs of one name, either may be the one kube-apiserver stores. Only those left are
 * parsed into records: at every recheck the Lease holds the request's own entry and others' that
 * the watch has shown, and records made for them were garbage that lived long enough to need a
 * full collection (docs/benchmarks.md, "Fifth pass").
 */
export function withReservations(view: ClusterView, reservations: Iterable<ReservedRange>): ClusterView {
  // Called for every admitted CREATE: nothing is copied unless a reservation is left to add.
  let extra: ServiceCIDRRecord[] | undefined
  for (const range of reservations) {
    if (view.pendingServiceCIDRHolding(range.name, range.cidrs) !== undefined) continue
    const shown = view.serviceCIDR(range.name)
    if (shown !== undefined && holdsCIDRs(shown, range.cidrs)) continue
    ;(extra ??= []).push(requestedServiceCIDR(range.name, range.cidrs))
  }
  if (extra === undefined) return view
  const pending = [...view.pendingServiceCIDRs(), ...extra]
  return {
    serviceCIDRs: () => view.serviceCIDRs(),
    serviceCIDR: (name: string) => view.serviceCIDR(name),
    cidrsOverlapping: (prefix): readonly PlacedCIDR[] => view.cidrsOverlapping(prefix),
    cidrsInOrder: (family): readonly PlacedCIDR[] => view.cidrsInOrder(family),
    pendingServiceCIDRs: () => pending,
    pendingServiceCIDRHolding: (name: string, cidrs: readonly string[]) => pending.find((record) => record.name === name && holdsCIDRs(record, cidrs)),
    addressesBetween: (family, first, last): AddressRange => view.addressesBetween(family, first, last),
    mislabelledAddresses: () => view.mislabelledAddresses(),
    occupiedBetween: (family, first, last) => view.occupiedBetween(family, first, last),
  }
}
