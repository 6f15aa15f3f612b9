// AdmissionReview v1 in and out (k8s.io/api/admission/v1). Decoding checks the shape of what the
// apiserver sent; encoding turns a Decision into the response the apiserver expects. No I/O.

import { Ajv } from 'ajv'
import type { Family } from '../policy/ip.ts'
import type { Decision, Operation, ReviewRequest, ServiceCIDRObject, ServiceReviewRequest } from '../policy/types.ts'
import { errors, type ErrorCode } from './errors.ts'

export const admissionAPIVersion = 'admission.k8s.io/v1'
const group = 'networking.k8s.io'
/** Versions whose ServiceCIDR spec is `{cidrs: string[]}`: v1 (GA 1.33), v1beta1 (1.31), v1alpha1 (1.27). */
const versions = new Set(['v1', 'v1beta1', 'v1alpha1'])

interface RawObject {
  apiVersion?: string
  kind?: string
  metadata?: { name?: string }
  spec?: { cidrs?: string[], type?: string, clusterIP?: string, ipFamilies?: string[] }
}

interface RawRequest {
  uid: string
  kind: { group: string, version: string, kind: string }
  resource?: { group: string, version: string, resource: string }
  subResource?: string
  name?: string
  namespace?: string
  operation: Operation
  userInfo?: { username?: string, groups?: string[] }
  object?: RawObject | null
  oldObject?: RawObject | null
  dryRun?: boolean
}

interface RawReview {
  apiVersion: string
  kind: string
  request: RawRequest
}

const objectSchema = {
  type: ['object', 'null'],
  properties: {
    apiVersion: { type: 'string' },
    kind: { type: 'string' },
    metadata: { type: 'object', properties: { name: { type: 'string' } } },
    spec: {
      type: 'object',
      properties: { cidrs: { type: 'array', items: { type: 'string' }, maxItems: 16 } },
    },
  },
} as const

const reviewSchema = {
  type: 'object',
  required: ['apiVersion', 'kind', 'request'],
  properties: {
    apiVersion: { const: admissionAPIVersion },
    kind: { const: 'AdmissionReview' },
    request: {
      type: 'object',
      required: ['uid', 'kind', 'operation'],
      properties: {
        uid: { type: 'string', minLength: 1, maxLength: 128 },
        kind: {
          type: 'object',
          required: ['group', 'version', 'kind'],
          properties: { group: { type: 'string' }, version: { type: 'string' }, kind: { type: 'string' } },
        },
        subResource: { type: 'string' },
        name: { type: 'string' },
        operation: { enum: ['CREATE', 'UPDATE', 'DELETE', 'CONNECT'] },
        userInfo: {
          type: 'object',
          properties: { username: { type: 'string' }, groups: { type: 'array', items: { type: 'string' } } },
        },
        object: objectSchema,
        oldObject: objectSchema,
        dryRun: { type: 'boolean' },
      },
    },
  },
} as const

const ajv = new Ajv({ allErrors: false, strict: false })
const isReview = ajv.compile<RawReview>(reviewSchema)

export type Decoded =
  | { readonly ok: true, readonly uid: string, readonly request: ReviewRequest }
  | { readonly ok: true, readonly uid: string, readonly service: ServiceReviewRequest }
  | { readonly ok: false, readonly uid: string, readonly error: ErrorCode, readonly detail: string }

/** The request uid if one can be found: every response echoes it, even an error. */
export function findUID(body: unknown): string {
  if (typeof body !== 'object' || body === null || !('request' in body)) return ''
  const request = body.request
  if (typeof request !== 'object' || request === null || !('uid' in request)) return ''
  return typeof request.uid === 'string' ? request.uid.slice(0, 128) : ''
}

function toServiceCIDR(raw: RawObject | null | undefined, fallbackName: string): ServiceCIDRObject | undefined {
  if (raw === null || raw === undefined) return undefined
  return { name: raw.metadata?.name ?? fallbackName, cidrs: raw.spec?.cidrs ?? [] }
}

/**
 * A Service CREATE for the optional capacity webhook. By the time validating admission runs, the
 * apiserver has allocated the ClusterIPs and set spec.ipFamilies; without them, the cluster's
 * default family applies. Headless and ExternalName Services take no address.
 */
function toServiceReview(raw: RawRequest): ServiceReviewRequest {
  const spec = raw.object?.spec ?? {}
  const takesNone = spec.type === 'ExternalName' || spec.clusterIP === 'None'
  const families = (spec.ipFamilies ?? []).filter((family): family is Family => family === 'IPv4' || family === 'IPv6')
  return {
    namespace: raw.namespace ?? '',
    name: raw.name ?? raw.object?.metadata?.name ?? '',
    families: takesNone ? [] : families.length > 0 ? families : undefined,
  }
}

export function decodeReview(body: unknown): Decoded {
  const uid = findUID(body)
  if (!isReview(body)) {
    const [first] = isReview.errors ?? []
    const detail = first ? `${first.instancePath || '(top level)'} ${first.message ?? 'is invalid'}` : 'unknown shape'
    return { ok: false, uid, error: errors.invalidReview, detail }
  }
  const raw = body.request
  if (raw.kind.group === '' && raw.kind.version === 'v1' && raw.kind.kind === 'Service' && raw.operation === 'CREATE' && !raw.subResource) {
    return { ok: true, uid, service: toServiceReview(raw) }
  }
  if (raw.kind.group !== group || raw.kind.kind !== 'ServiceCIDR' || !versions.has(raw.kind.version) || (raw.subResource ?? '') !== '') {
    const what = `${raw.kind.group || 'core'}/${raw.kind.version} ${raw.kind.kind}${raw.subResource ? ` (subresource ${raw.subResource})` : ''}`
    return { ok: false, uid, error: errors.unsupportedResource, detail: `got ${what}` }
  }
  const name = raw.name ?? raw.object?.metadata?.name ?? raw.oldObject?.metadata?.name ?? ''
  return {
    ok: true,
    uid,
    request: {
      operation: raw.operation,
      name,
      userInfo: { username: raw.userInfo?.username ?? '', groups: raw.userInfo?.groups ?? [] },
      object: toServiceCIDR(raw.object, name),
      oldObject: toServiceCIDR(raw.oldObject, name),
      dryRun: raw.dryRun ?? false,
    },
  }
}

export interface AdmissionResponse {
  uid: string
  allowed: boolean
  status?: {
    code: number
    reason?: string
    message: string
    details?: { causes: { reason: string, message: string, field: string }[] }
  }
  warnings?: string[]
  auditAnnotations?: Record<string, string>
}

export interface AdmissionReviewOut {
  apiVersion: typeof admissionAPIVersion
  kind: 'AdmissionReview'
  response: AdmissionResponse
}

const wrap = (response: AdmissionResponse): AdmissionReviewOut => ({ apiVersion: admissionAPIVersion, kind: 'AdmissionReview', response })

/** Keys under which the violations are recorded in the API server's audit log. */
const auditKey = 'servicecidr-guard.dev/violations'

export function encodeDecision(uid: string, decision: Decision): AdmissionReviewOut {
  const response: AdmissionResponse = { uid, allowed: decision.allowed }
  if (!decision.allowed) {
    response.status = {
      code: 403,
      reason: 'Forbidden',
      message: decision.message,
      details: { causes: decision.violations.map(({ rule, message, field }) => ({ reason: rule, message, field })) },
    }
  }
  if (decision.warnings.length > 0) response.warnings = [...decision.warnings]
  if (decision.violations.length > 0) {
    response.auditAnnotations = { [auditKey]: decision.violations.map((violation) => `${violation.rule}: ${violation.message}`).join('; ') }
  }
  return wrap(response)
}

/** An error answer: itself a valid AdmissionReview that refuses, so the apiserver never guesses. */
export function encodeError(uid: string, error: ErrorCode, detail?: string): AdmissionReviewOut {
  const message = `servicecidr-guard: ${error.message}${detail ? ` (${detail})` : ''} [${error.code}]`
  return wrap({ uid, allowed: false, status: { code: error.status, reason: error.reason, message } })
}
