// One review, start to finish: decode the AdmissionReview, decide, reserve what was admitted,
// encode. The cluster and the shared reservations are reached only through the ports below, so tests
// build a reviewer the way production does.

import { decide, decideService, unconfirmed } from '../policy/engine.ts'
import { withReservations, type ReservedRange } from '../policy/reservations.ts'
import { requestedServiceCIDR } from '../policy/state.ts'
import type { ClusterView, Decision, Policy, ReviewRequest, ServiceCIDRRecord, ServiceReviewRequest } from '../policy/types.ts'
import { errors, type ErrorCode } from './errors.ts'
import { decodeReview, encodeDecision, encodeError, type AdmissionReviewOut } from './review.ts'

export interface ClusterPort {
  /** The cluster as last seen, or undefined while it is not known (not synced, or stale). */
  view(): ClusterView | undefined
  /** Resolves once view() is known again, or after a short bound (ClusterCache.current); called after view(). */
  current(): Promise<void>
  /** Remembers an admitted ServiceCIDR until the watch shows it (see ClusterState.reserve). */
  reserve(record: ServiceCIDRRecord): void
  /** Forgets a reservation whose admission was withdrawn. */
  release(record: ServiceCIDRRecord): void
}

export type ReservationResult =
  | { readonly outcome: 'recorded' }
  | { readonly outcome: 'refused' }
  | { readonly outcome: 'failed', readonly reason: string, readonly detail: string }

/** Where every replica records what it admits (src/cluster/reservations.ts). */
export interface ReservationPort {
  /**
   * Records the admitted CIDRs; `recheck` decides the request again with the reservations held
   * there, and answers whether it is still admitted. Resolves within its deadline, never rejects.
   */
  reserve(request: { readonly name: string, readonly cidrs: readonly string[], readonly uid: string }, recheck: (held: readonly ReservedRange[]) => boolean): Promise<ReservationResult>
}

/** warned: allowed with warnings (enforcement Warn); audited: allowed, violations only logged (Audit). */
export type Verdict = 'allowed' | 'denied' | 'warned' | 'audited' | 'error'

export interface Outcome {
  readonly uid: string
  readonly verdict: Verdict
  /** HTTP status to answer with: 200 for every decision, 400/500 for errors. */
  readonly status: number
  readonly review: AdmissionReviewOut
  readonly request?: ReviewRequest
  /** Set instead of `request` for a Service CREATE or UPDATE (capacity warnings). */
  readonly service?: ServiceReviewRequest
  readonly decision?: Decision
  /** What became of the shared reservation: recorded, refused (another replica holds an overlapping range), failed (why), or none needed. */
  readonly reservation?: string
  readonly error?: { readonly code: string, readonly detail: string }
  /** An error's operation, when the body named one. */
  readonly operation?: string
}

export interface ReviewerOptions {
  readonly policy: () => Policy
  readonly cluster: ClusterPort
  /** Absent: what a replica admits is reserved in its own model only (serve --no-shared-reservation). */
  readonly reservations?: ReservationPort | undefined
}

/**
 * Reviews one raw request body (the bytes, not parsed: see decodeReview). Answers at once when
 * nothing is waited for (a promise then would cost a microtask), or with a promise that never
 * rejects for what the review holds; a bug may still throw or reject.
 */
export type Reviewer = (body: Buffer) => Outcome | Promise<Outcome>

export function errorOutcome(uid: string, error: ErrorCode, detail = '', operation?: string): Outcome {
  return { uid, verdict: 'error', status: error.status, review: encodeError(uid, error, detail), error: { code: error.code, detail }, ...(operation === undefined ? {} : { operation }) }
}

function verdictOf(decision: Decision): Verdict {
  if (!decision.allowed) return 'denied'
  if (decision.violations.length === 0) return 'allowed'
  return decision.warnings.length > 0 ? 'warned' : 'audited'
}

/**
 * The ServiceCIDR an allowed request brings in, if it must be reserved: a CREATE, or an UPDATE that
 * adds a CIDR, that is not a dry run (a dry run never reserves).
 */
function reservable(request: ReviewRequest, decision: Decision): ServiceCIDRRecord | undefined {
  const { object, operation, dryRun } = request
  if (!decision.allowed || dryRun || object === undefined || decision.bypass === 'MetadataOnly' || (operation !== 'CREATE' && operation !== 'UPDATE')) return undefined
  return requestedServiceCIDR(request.name, object.cidrs)
}

/** The answer to a decided request: two literals, not one with a spread of the optional field (a spread is copied property by property at run time, for every review). */
function answer(uid: string, request: ReviewRequest, decision: Decision, reservation?: string): Outcome {
  return reservation === undefined
    ? { uid, verdict: verdictOf(decision), status: 200, review: encodeDecision(uid, decision), request, decision }
    : { uid, verdict: verdictOf(decision), status: 200, review: encodeDecision(uid, decision), request, decision, reservation }
}

export function createReviewer({ policy, cluster, reservations }: ReviewerOptions): Reviewer {
  /**
   * Decides a decoded request, and answers at once unless the shared reservation must confirm it.
   * Not an async function: one is given a generator object holding a copy of all its registers at
   * every call, awaited or not, and most reviews never wait. The two waits are the small async
   * functions below.
   */
  const review = (uid: string, request: ReviewRequest): Outcome | Promise<Outcome> => {
    const current = policy()
    // decide() and reserve() run in one synchronous step: no other review on this replica can
    // interleave, so of two overlapping CREATEs arriving together the second sees the first's
    // reservation.
    const view = cluster.view()
    const decision = decide(current, view, request)
    const record = reservable(request, decision)
    if (record === undefined) return answer(uid, request, decision)
    cluster.reserve(record)
    // Only the overlap rule reads reservations; the apiserver's own default ServiceCIDR never waits.
    if (reservations === undefined || current.overlap === 'Allow' || decision.bypass === 'ApiserverDefault') return answer(uid, request, decision)
    return confirm(reservations, current, view, uid, request, decision, record)
  }

  const confirm = async (reservations: ReservationPort, current: Policy, view: ClusterView | undefined, uid: string, request: ReviewRequest, decision: Decision, record: ServiceCIDRRecord): Promise<Outcome> => {
    const decidedAt = view?.revision
    let final = decision
    const result = await reservations.reserve({ name: request.name, cidrs: decision.cidrs, uid }, (held) => {
      // An exempt request is recorded, so that others' overlap checks see it, but never refused.
      if (decision.bypass === 'Exempt') return true
      const latest = cluster.view()
      const seen = latest && withReservations(latest, held)
      // Deciding again is needed only if it would read something the decision did not: a range in
      // the Lease that the view lacks (withReservations added one), or a ServiceCIDR the watch
      // brought since (the revision moved). Ranges this replica reserved since are not: each was
      // decided with this request's reservation in view, so it was admitted knowing of it (it does
      // not overlap it or, under AllowExpansion, strictly contains it), and the two stand in the
      // order they were decided. Deciding again would refuse this one for such an expansion.
      if (seen !== undefined && seen === view && decidedAt !== undefined && seen.revision === decidedAt) return final.allowed
      final = decide(current, seen, request)
      return final.allowed
    })
    if (result.outcome === 'failed') final = unconfirmed(current, final, request.name, result.detail)
    // A withdrawn admission releases this replica's reservation; an admission that stands (Warn,
    // Audit, exempt) keeps it until the watch shows the ServiceCIDR.
    if (!final.allowed) cluster.release(record)
    return answer(uid, request, final, result.outcome === 'failed' ? `failed (${result.reason})` : result.outcome)
  }

  const reviewService = (uid: string, service: ServiceReviewRequest): Outcome => {
    const decision = decideService(policy(), cluster.view(), service)
    return { uid, verdict: 'allowed', status: 200, review: encodeDecision(uid, decision), decision, service }
  }

  /**
   * While the cluster is not known: waits for it, then decides. Before deciding, never between
   * decide() and reserve(); still unknown after the wait, the rules that need the cluster fail
   * closed. Only a review that waits makes the closure it is given.
   */
  const afterCurrent = async (decideNow: () => Outcome | Promise<Outcome>): Promise<Outcome> => {
    await cluster.current()
    return decideNow()
  }

  return (body) => {
    const decoded = decodeReview(body)
    if (!decoded.ok) return errorOutcome(decoded.uid, decoded.error, decoded.detail, decoded.operation)
    const known = cluster.view() !== undefined
    if ('service' in decoded) return known ? reviewService(decoded.uid, decoded.service) : afterCurrent(() => reviewService(decoded.uid, decoded.service))
    return known ? review(decoded.uid, decoded.request) : afterCurrent(() => review(decoded.uid, decoded.request))
  }
}

export { errors }
