// AdmissionReview v1 in and out (k8s.io/api/admission/v1). Decoding reads, from the raw body,
// only the fields a decision needs, and checks their shape; encoding turns a Decision into the
// response the apiserver expects. No I/O.

import type { Family } from '../policy/ip.ts'
import type { Decision, Operation, ReviewRequest, ServiceCIDRObject, ServiceReviewRequest } from '../policy/types.ts'
import { errors, type ErrorCode } from './errors.ts'
import { JSONSyntaxError, Mismatch, boolean, knownString, object, readDocument, readJSON, string, strings, type ReadObject, type Shape, type Value } from '../json/reader.ts'

export const admissionAPIVersion = 'admission.k8s.io/v1'
const group = 'networking.k8s.io'
/** Versions whose ServiceCIDR spec is `{cidrs: string[]}`: v1 (GA 1.33), v1beta1 (1.31), v1alpha1 (1.27). */
const versions = new Set(['v1', 'v1beta1', 'v1alpha1'])
const operations: readonly string[] = ['CREATE', 'UPDATE', 'DELETE', 'CONNECT'] satisfies Operation[]

/**
 * The largest AdmissionReview the apiserver can send this webhook for a request that can succeed,
 * rounded up: 6 MiB.
 *
 * - A stored object is at most etcd's request limit, 1.5 MiB (--max-request-bytes' default) in
 *   protobuf, which kube-apiserver uses for built-in kinds such as ServiceCIDR and Service. The
 *   apiserver reads request bodies of up to 3 MiB of JSON (MaxRequestBodyBytes in
 *   k8s.io/apiserver/pkg/server/config.go, "2x" the etcd limit because JSON is larger), but an
 *   object beyond 1.5 MiB of protobuf is refused by etcd after admission, so no admission of it
 *   can matter.
 * - The same object in the review's JSON is about its protobuf size (names and values are the
 *   same bytes; field tags and punctuation are a few bytes either way), except that Go's JSON
 *   encoder escapes <, > and & as \u003c (six bytes for one), and the only free text is
 *   annotation values, at most 256 KiB in all (TotalAnnotationSizeLimitB in apimachinery's
 *   ValidateAnnotations): at most 1.25 MiB more. So an object is at most ~2.75 MiB of JSON.
 * - A review carries two objects only for UPDATE (object and oldObject), and only UPDATEs that
 *   change the spec reach the webhook (the matchCondition skip-metadata-only-updates), or, for
 *   Services, that may take a new ClusterIP (config/capacity-warnings); CREATE and DELETE carry
 *   one. Two objects and the envelope: ~5.5 MiB.
 *
 * controller-runtime allows 7 MiB for any kind; ServiceCIDRs and Services need no more than this.
 */
export const maxReviewBytes = 6 * 1024 * 1024
/** More groups than this is refused: no real user has them, and each costs memory to read. */
export const maxGroups = 10_000

const objectShape = object({
  metadata: object({ name: string }),
  spec: object({ cidrs: strings(16), type: string, clusterIP: string, ipFamilies: strings(2) }),
}, { nullable: true })

// The fields that hold the same few values in every review are read as constants (knownString).
const reviewShape = object({
  apiVersion: knownString(admissionAPIVersion),
  kind: knownString('AdmissionReview'),
  request: object({
    uid: string,
    kind: object({ group: knownString(group, ''), version: knownString(...versions), kind: knownString('ServiceCIDR', 'Service') }),
    subResource: string,
    name: string,
    namespace: string,
    operation: knownString(...operations),
    userInfo: object({ username: string, groups: strings(maxGroups) }),
    object: objectShape,
    oldObject: objectShape,
    dryRun: boolean,
  }),
})

/** The fields read, once their shape has been checked. */
interface RawObject {
  metadata?: { name?: string }
  spec?: { cidrs?: string[], type?: string, clusterIP?: string, ipFamilies?: string[] }
}

interface RawRequest {
  uid: string
  kind: { group: string, version: string, kind: string }
  subResource?: string
  name?: string
  namespace?: string
  operation: Operation
  userInfo?: { username?: string, groups?: string[] }
  object?: RawObject | null
  oldObject?: RawObject | null
  dryRun?: boolean
}

export type Decoded =
  | { readonly ok: true, readonly uid: string, readonly request: ReviewRequest }
  | { readonly ok: true, readonly uid: string, readonly service: ServiceReviewRequest }
  /** `operation`: the request's, when it names one of the four (a review of another resource, say). */
  | { readonly ok: false, readonly uid: string, readonly error: ErrorCode, readonly detail: string, readonly operation?: Operation }

const isObject = (value: Value | undefined): value is ReadObject =>
  typeof value === 'object' && value !== null && !(value instanceof Mismatch) && !Array.isArray(value)

/**
 * The first value that is not of its shape, as ajv would word it; fields in the shape's order.
 * `path` holds the field names down to `value`; it is joined only when there is a problem.
 */
function shapeProblem(value: Value | undefined, shape: Shape, path: string[]): string | undefined {
  if (value instanceof Mismatch) {
    const at = path.length === 0 ? '(top level)' : `/${path.join('/')}`
    if (value.index >= 0) return `${at}/${value.index} must be ${value.expected === 'objects' ? 'object' : 'string'}`
    if (value.tooMany && shape.type === 'strings') return `${at} must NOT have more than ${shape.maxItems} items`
    const expected = { string: 'string', boolean: 'boolean', strings: 'array', objects: 'array', object: shape.type === 'object' && shape.nullable ? 'object,null' : 'object' }[value.expected]
    return `${at} must be ${expected}`
  }
  if (shape.type !== 'object' || !isObject(value)) return undefined
  for (const field of shape.fields) {
    const child = value[field.name]
    // Strings, booleans and null were read as their shape asks; a Mismatch is an object.
    if (child === undefined || typeof child !== 'object') continue
    path.push(field.name)
    const problem = shapeProblem(child, field.shape, path)
    path.pop()
    if (problem !== undefined) return problem
  }
  return undefined
}

function required(value: ReadObject, path: string, names: readonly string[]): string | undefined {
  for (const name of names) {
    if (value[name] === undefined) return `${path || '(top level)'} must have required property '${name}'`
  }
  return undefined
}

// The required properties, in the order the old JSON Schema listed them (built once, not per review).
const requiredTop = ['apiVersion', 'kind', 'request'] as const
const requiredRequest = ['uid', 'kind', 'operation'] as const
const requiredKind = ['group', 'version', 'kind'] as const

/**
 * What is wrong with a review of the right shape, in the order ajv checked the old JSON Schema.
 * `mismatches`: as readDocument counted them; with none, the value is not walked for them.
 */
function reviewProblem(review: Value, mismatches: number): string | undefined {
  const shape = mismatches === 0 ? undefined : shapeProblem(review, reviewShape, [])
  if (shape !== undefined) return shape
  if (!isObject(review)) return '(top level) must be object'
  const top = required(review, '', requiredTop)
  if (top !== undefined) return top
  if (review['apiVersion'] !== admissionAPIVersion) return `/apiVersion must be equal to constant '${admissionAPIVersion}'`
  if (review['kind'] !== 'AdmissionReview') return "/kind must be equal to constant 'AdmissionReview'"
  const request = review['request'] as ReadObject
  const missing = required(request, '/request', requiredRequest) ?? required(request['kind'] as ReadObject, '/request/kind', requiredKind)
  if (missing !== undefined) return missing
  const uid = request['uid'] as string
  if (uid.length < 1) return '/request/uid must NOT have fewer than 1 characters'
  if (uid.length > 128) return '/request/uid must NOT have more than 128 characters'
  if (!operations.includes(request['operation'] as string)) return '/request/operation must be equal to one of the allowed values'
  return undefined
}

/** A field of the body's request, whatever the rest of the body is: for the answer to an invalid one. */
function requestField(review: Value, key: string): Value | undefined {
  const request = isObject(review) ? review['request'] : undefined
  return isObject(request) ? request[key] : undefined
}

/** The request's operation, if the body names one of the four: the metrics and the log label refusals by it. */
function operationOf(review: Value): Operation | undefined {
  const operation = requestField(review, 'operation')
  return typeof operation === 'string' && operations.includes(operation) ? operation as Operation : undefined
}

/** The request uid, if the body has one: every response echoes it, even an error. */
function uidOf(review: Value): string {
  const uid = requestField(review, 'uid')
  return typeof uid === 'string' ? uid.slice(0, 128) : ''
}

/** The request uid if one can be found in a raw body: for answers to requests that failed after decoding. */
export function findUID(body: Buffer): string {
  try {
    return uidOf(readJSON(body, reviewShape))
  } catch {
    return ''
  }
}

function toServiceCIDR(raw: RawObject | null | undefined, fallbackName: string): ServiceCIDRObject | undefined {
  if (raw === null || raw === undefined) return undefined
  return { name: raw.metadata?.name ?? fallbackName, cidrs: raw.spec?.cidrs ?? [] }
}

/**
 * The families a Service takes ClusterIPs from: none when headless or ExternalName, undefined
 * when spec.ipFamilies is not set (the cluster's default family).
 */
function familiesOf(raw: RawObject | null | undefined): Family[] | undefined {
  const spec = raw?.spec ?? {}
  if (spec.type === 'ExternalName' || spec.clusterIP === 'None') return []
  const families = (spec.ipFamilies ?? []).filter((family): family is Family => family === 'IPv4' || family === 'IPv6')
  return families.length > 0 ? families : undefined
}

/**
 * A Service CREATE or UPDATE for the optional capacity webhook. By the time validating admission
 * runs, the apiserver has allocated the ClusterIPs and set spec.ipFamilies (BeginCreate and
 * BeginUpdate come before admission in k8s.io/apiserver's generic Store); an UPDATE also says
 * which families the Service held before.
 */
function toServiceReview(raw: RawRequest, operation: 'CREATE' | 'UPDATE'): ServiceReviewRequest {
  const request = {
    operation,
    namespace: raw.namespace ?? '',
    name: raw.name ?? raw.object?.metadata?.name ?? '',
    families: familiesOf(raw.object),
  }
  return operation === 'UPDATE' ? { ...request, held: familiesOf(raw.oldObject) } : request
}

/** Decodes a raw request body: JSON first (SCG_INVALID_JSON), then the review's shape (SCG_INVALID_REVIEW). */
export function decodeReview(body: Buffer): Decoded {
  let review: Value
  let mismatches: number
  try {
    ({ value: review, mismatches } = readDocument(body, reviewShape))
  } catch (error) {
    if (error instanceof JSONSyntaxError) return { ok: false, uid: '', error: errors.invalidJSON, detail: error.message }
    throw error
  }
  const uid = uidOf(review)
  const problem = reviewProblem(review, mismatches)
  if (problem !== undefined) {
    const operation = operationOf(review)
    return { ok: false, uid, error: errors.invalidReview, detail: problem, ...(operation === undefined ? {} : { operation }) }
  }
  const raw = (review as unknown as { request: RawRequest }).request
  if (raw.kind.group === '' && raw.kind.version === 'v1' && raw.kind.kind === 'Service' && (raw.operation === 'CREATE' || raw.operation === 'UPDATE') && !raw.subResource) {
    return { ok: true, uid, service: toServiceReview(raw, raw.operation) }
  }
  if (raw.kind.group !== group || raw.kind.kind !== 'ServiceCIDR' || !versions.has(raw.kind.version) || (raw.subResource ?? '') !== '') {
    const what = `${raw.kind.group || 'core'}/${raw.kind.version} ${raw.kind.kind}${raw.subResource ? ` (subresource ${raw.subResource})` : ''}`
    return { ok: false, uid, error: errors.unsupportedResource, detail: `got ${what}`, operation: raw.operation }
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

/**
 * The key under which the violations are recorded in the API server's audit log. kube-apiserver
 * prefixes it with the webhook's name and drops a key that is then not `prefix/name` (the
 * validating webhook dispatcher's callHook, checkKeyFormat in k8s.io/apiserver/pkg/admission), so
 * it is a name only: the audit event holds `validate.servicecidr-guard.dev/violations`.
 */
const auditKey = 'violations'

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
