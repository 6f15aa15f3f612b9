// Every error the HTTP edge can answer with, in one place, with a stable code. A user error (bad
// input) is told apart from an internal one; neither is a denial, which is a 200 AdmissionReview.

export interface ErrorCode {
  readonly code: string
  /** HTTP status of the response and `status.code` inside the AdmissionReview. */
  readonly status: 400 | 404 | 413 | 429 | 500
  /** metav1.StatusReason */
  readonly reason: 'BadRequest' | 'NotFound' | 'RequestEntityTooLarge' | 'TooManyRequests' | 'InternalError'
  readonly message: string
}

const userError = (code: string, message: string): ErrorCode => ({ code, status: 400, reason: 'BadRequest', message })

export const errors = {
  emptyBody: userError('SCG_EMPTY_BODY', 'the request body is empty; send an AdmissionReview as JSON'),
  contentType: userError('SCG_CONTENT_TYPE', 'the content type must be application/json'),
  // 413, as kube-apiserver answers a body over its own limit (limitedReadBody in
  // k8s.io/apiserver/pkg/endpoints/handlers/rest.go). The body is not read, so the uid is unknown.
  bodyTooLarge: { code: 'SCG_BODY_TOO_LARGE', status: 413, reason: 'RequestEntityTooLarge', message: 'the request body is larger than 6 MiB, which no AdmissionReview of a ServiceCIDR or Service needs' },
  // 429 with Retry-After, as kube-apiserver's own max-in-flight filter answers: the apiserver's
  // webhook client (client-go's rest.Request) retries after the delay while its timeout allows.
  overloaded: { code: 'SCG_OVERLOADED', status: 429, reason: 'TooManyRequests', message: 'too many request bytes are in flight on this replica; retry after the Retry-After delay' },
  invalidJSON: userError('SCG_INVALID_JSON', 'the request body is not valid JSON'),
  invalidReview: userError('SCG_INVALID_REVIEW', 'the request is not an admission.k8s.io/v1 AdmissionReview'),
  unsupportedResource: userError('SCG_UNSUPPORTED_RESOURCE', 'this webhook reviews networking.k8s.io ServiceCIDRs, and core/v1 Service CREATEs and UPDATEs for capacity warnings, nothing else; check the webhook configuration rules'),
  badRequest: userError('SCG_BAD_REQUEST', 'the request could not be read'),
  notFound: { code: 'SCG_NOT_FOUND', status: 404, reason: 'NotFound', message: 'no such endpoint; AdmissionReviews go to POST /validate' },
  internal: { code: 'SCG_INTERNAL', status: 500, reason: 'InternalError', message: 'servicecidr-guard failed to review the request' },
} as const satisfies Record<string, ErrorCode>
