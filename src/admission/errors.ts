// Every error the HTTP edge can answer with, in one place, with a stable code. A user error (bad
// input) is told apart from an internal one; neither is a denial, which is a 200 AdmissionReview.

export interface ErrorCode {
  readonly code: string
  /** HTTP status of the response and `status.code` inside the AdmissionReview. */
  readonly status: 400 | 404 | 500
  /** metav1.StatusReason */
  readonly reason: 'BadRequest' | 'NotFound' | 'InternalError'
  readonly message: string
}

const userError = (code: string, message: string): ErrorCode => ({ code, status: 400, reason: 'BadRequest', message })

export const errors = {
  emptyBody: userError('SCG_EMPTY_BODY', 'the request body is empty; send an AdmissionReview as JSON'),
  contentType: userError('SCG_CONTENT_TYPE', 'the content type must be application/json'),
  bodyTooLarge: userError('SCG_BODY_TOO_LARGE', 'the request body is larger than 7 MiB, which no AdmissionReview of a ServiceCIDR needs'),
  invalidJSON: userError('SCG_INVALID_JSON', 'the request body is not valid JSON'),
  invalidReview: userError('SCG_INVALID_REVIEW', 'the request is not an admission.k8s.io/v1 AdmissionReview'),
  unsupportedResource: userError('SCG_UNSUPPORTED_RESOURCE', 'servicecidr-guard only reviews networking.k8s.io ServiceCIDRs; check the webhook configuration rules'),
  badRequest: userError('SCG_BAD_REQUEST', 'the request could not be read'),
  notFound: { code: 'SCG_NOT_FOUND', status: 404, reason: 'NotFound', message: 'no such endpoint; AdmissionReviews go to POST /validate' },
  internal: { code: 'SCG_INTERNAL', status: 500, reason: 'InternalError', message: 'servicecidr-guard failed to review the request' },
} as const satisfies Record<string, ErrorCode>
