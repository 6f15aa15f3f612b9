// Prometheus metrics. One registry per server, built from arguments, so tests get their own.

import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client'
import type { ReservationEvents } from '../cluster/reservations.ts'
import { utilisation } from '../policy/audit.ts'
import { allocatableSize } from '../policy/ip.ts'
import type { ClusterState } from '../policy/state.ts'
import { FastCounter, FastHistogram } from './series.ts'

export interface MetricSources {
  readonly state: ClusterState
  readonly synced: () => boolean
  readonly relists: () => number
  /** Counts shared reservations that expired unseen; called before each scrape. */
  readonly sweepReservations?: () => void
}

export class Metrics {
  readonly registry = new Registry()
  // Updated by every review: see series.ts.
  readonly reviews: FastCounter<'operation' | 'outcome'>
  readonly errors: Counter<'code'>
  readonly decisionSeconds: FastHistogram<'operation'>
  readonly policyReloads: Counter
  readonly policyReloadErrors: Counter
  readonly policyValid: Gauge
  readonly certificateReloads: Counter
  readonly certificateErrors: Counter
  readonly certificateExpiry: Gauge
  readonly reservations: FastCounter<'outcome'>
  readonly reservationSeconds: FastHistogram
  readonly reservationWrites: FastCounter<'result'>
  readonly reservationsExpiredUnseen: Counter

  constructor(sources: MetricSources, options: { defaultMetrics?: boolean } = {}) {
    const registers = [this.registry]
    const prefix = 'servicecidr_guard_'
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry, prefix })
    this.reviews = new FastCounter(this.registry, `${prefix}reviews_total`, 'Admission reviews answered, by operation and outcome (allowed, denied, warned, audited, error).', ['operation', 'outcome'])
    this.errors = new Counter({ name: `${prefix}review_errors_total`, help: 'Requests answered with an error, by stable error code.', labelNames: ['code'], registers })
    this.decisionSeconds = new FastHistogram(this.registry, `${prefix}decision_duration_seconds`, 'Time to decide one review, from the parsed body to the encoded response.', ['operation'],
      [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1])
    this.policyReloads = new Counter({ name: `${prefix}policy_reloads_total`, help: 'Policy files reloaded after a change.', registers })
    this.policyReloadErrors = new Counter({ name: `${prefix}policy_reload_errors_total`, help: 'Changed policy files refused (the last good policy stays in force).', registers })
    this.policyValid = new Gauge({ name: `${prefix}policy_valid`, help: '1 when the policy file on disk is the policy in force, 0 when it was refused.', registers })
    this.certificateReloads = new Counter({ name: `${prefix}certificate_reloads_total`, help: 'Serving certificates reloaded after a change.', registers })
    this.certificateErrors = new Counter({ name: `${prefix}certificate_errors_total`, help: 'Serving certificate files that could not be used.', registers })
    this.certificateExpiry = new Gauge({ name: `${prefix}certificate_expiry_timestamp_seconds`, help: 'When the serving certificate in use expires.', registers })

    this.reservations = new FastCounter(this.registry, `${prefix}shared_reservations_total`,
      'Admitted ranges recorded in the shared reservation Lease, by outcome: recorded; refused (another replica holds an overlapping range); or why it failed (unavailable, missing, forbidden, rejected, conflicts, deadline, full, internal).',
      ['outcome'])
    this.reservationSeconds = new FastHistogram(this.registry, `${prefix}shared_reservation_duration_seconds`, 'Time a review waited for its shared reservation: queue, reads, writes and retries.', [],
      [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5])
    // A write per batch of admitted CREATEs: often enough, under load, to be a FastCounter too.
    this.reservationWrites = new FastCounter(this.registry, `${prefix}shared_reservation_writes_total`, 'Writes of the shared reservation Lease, by result: written, conflict (someone wrote first; read again and retried), error.', ['result'])
    this.reservationsExpiredUnseen = new Counter({
      name: `${prefix}shared_reservations_expired_unseen_total`,
      help: 'Reservations this replica recorded that expired before the watch showed their ServiceCIDR: the request failed after admission (another webhook, etcd, a duplicate name), or the review was forged.',
      registers,
      collect() {
        sources.sweepReservations?.()
      },
    })

    const { state } = sources
    new Gauge({ name: `${prefix}cache_synced`, help: '1 when the ServiceCIDR and IPAddress cache is synced and current.', registers, collect() { this.set(sources.synced() ? 1 : 0) } })
    new Gauge({ name: `${prefix}cache_relists_total`, help: 'Re-lists after a watch could not continue.', registers, collect() { this.set(sources.relists()) } })
    new Gauge({
      name: `${prefix}cache_objects`,
      help: 'Objects in the cache, by resource.',
      labelNames: ['resource'],
      registers,
      collect() {
        this.set({ resource: 'servicecidrs' }, state.serviceCIDRCount)
        this.set({ resource: 'ipaddresses' }, state.ipAddressCount)
      },
    })
    new Gauge({
      name: `${prefix}servicecidr_usable_addresses`,
      help: 'Addresses a ServiceCIDR can allocate (network and IPv4 broadcast excluded; none from an IPv6 CIDR shorter than /64, which the allocator refuses).',
      labelNames: ['servicecidr', 'cidr'],
      registers,
      collect() {
        this.reset()
        for (const record of state.serviceCIDRs()) {
          for (const prefix of record.cidrs) this.set({ servicecidr: record.name, cidr: prefix.text }, Number(allocatableSize(prefix)))
        }
      },
    })
    new Gauge({
      name: `${prefix}servicecidr_addresses_in_use`,
      help: 'Allocator-managed IPAddresses inside a ServiceCIDR (an address in overlapping ranges counts in each).',
      labelNames: ['servicecidr', 'cidr'],
      registers,
      collect() {
        this.reset()
        for (const record of state.serviceCIDRs()) {
          for (const prefix of record.cidrs) this.set({ servicecidr: record.name, cidr: prefix.text }, utilisation(state, prefix).inUse)
        }
      },
    })
  }

  /** The shared reservations' events, counted here. */
  reservationEvents(): ReservationEvents {
    return {
      settled: (outcome, seconds) => {
        this.reservations.inc({ outcome })
        this.reservationSeconds.observe({}, seconds)
      },
      write: (result) => {
        this.reservationWrites.inc({ result })
      },
      expiredUnseen: (count) => {
        this.reservationsExpiredUnseen.inc(count)
      },
    }
  }
}
