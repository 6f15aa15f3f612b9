// One review, start to finish, without I/O: decode the AdmissionReview, decide, encode. The
// cluster is reached only through the port below, so tests build a reviewer the way production does.

import { decide, decideService } from '../policy/engine.ts'
import { toServiceCIDRRecord } from '../policy/state.ts'
import type { ClusterView, Decision, Policy, ReviewRequest, ServiceCIDRRecord, ServiceReviewRequest } from '../policy/types.ts'
import { errors, type ErrorCode } from './errors.ts'
import { decodeReview, encodeDecision, encodeError, type AdmissionReviewOut } from './review.ts'

export interface ClusterPort {
  /** The cluster as last seen, or undefined while it is not known (not synced, or stale). */
  view(): ClusterView | undefined
  /** Remembers an admitted ServiceCIDR until the watch shows it (see ClusterState.reserve). */
  reserve(record: ServiceCIDRRecord): void
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
  /** Set instead of `request` for a Service CREATE (capacity warnings). */
  readonly service?: ServiceReviewRequest
  readonly decision?: Decision
  readonly error?: { readonly code: string, readonly detail: string }
}

export interface ReviewerOptions {
  readonly policy: () => Policy
  readonly cluster: ClusterPort
}

/** Reviews one raw request body (the bytes, not parsed: see decodeReview). */
export type Reviewer = (body: Buffer) => Outcome

export function errorOutcome(uid: string, error: ErrorCode, detail = ''): Outcome {
  return { uid, verdict: 'error', status: error.status, review: encodeError(uid, error, detail), error: { code: error.code, detail } }
}

function verdictOf(decision: Decision): Verdict {
  if (!decision.allowed) return 'denied'
  if (decision.violations.length === 0) return 'allowed'
  return decision.warnings.length > 0 ? 'warned' : 'audited'
}

export function createReviewer({ policy, cluster }: ReviewerOptions): Reviewer {
  return (body) => {
    const decoded = decodeReview(body)
    if (!decoded.ok) return errorOutcome(decoded.uid, decoded.error, decoded.detail)
    if ('service' in decoded) {
      const decision = decideService(policy(), cluster.view(), decoded.service)
      return { uid: decoded.uid, verdict: 'allowed', status: 200, review: encodeDecision(decoded.uid, decision), decision, service: decoded.service }
    }
    const { uid, request } = decoded
    // decide() and reserve() run in one synchronous step: no other review can interleave, so of
    // two overlapping CREATEs arriving together the second sees the first's reservation.
    const decision = decide(policy(), cluster.view(), request)
    const { object, operation, dryRun } = request
    if (decision.allowed && !dryRun && object !== undefined && decision.bypass !== 'MetadataOnly' && (operation === 'CREATE' || operation === 'UPDATE')) {
      const record = toServiceCIDRRecord({ metadata: { name: request.name }, spec: { cidrs: object.cidrs } })
      if (record !== undefined) cluster.reserve(record)
    }
    return { uid, verdict: verdictOf(decision), status: 200, review: encodeDecision(uid, decision), request, decision }
  }
}

export { errors }
