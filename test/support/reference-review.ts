// An independent decoding of an AdmissionReview body, for the property tests: JSON.parse, then the
// rules of src/admission/review.ts written out plainly over the parsed value. The webhook's own
// decoder reads the bytes without building what it does not need; on every input the two must
// agree on the outcome (which error, which uid, which request).

import type { Decoded } from '../../src/admission/review.ts'
import type { Family } from '../../src/policy/ip.ts'
import type { Operation, ServiceReviewRequest } from '../../src/policy/types.ts'

export type ReferenceDecoded =
  | { readonly code: 'ok', readonly uid: string, readonly decoded: Decoded }
  | { readonly code: 'SCG_INVALID_JSON' | 'SCG_INVALID_REVIEW' | 'SCG_UNSUPPORTED_RESOURCE', readonly uid: string }

type Obj = Record<string, unknown>
const isObj = (value: unknown): value is Obj => typeof value === 'object' && value !== null && !Array.isArray(value)
/** Own properties only: JSON.parse makes `__proto__` an own key, and nothing is inherited. */
const get = (value: Obj, key: string): unknown => (Object.hasOwn(value, key) ? value[key] : undefined)
const optional = (value: unknown, check: (value: unknown) => boolean): boolean => value === undefined || check(value)
const isString = (value: unknown): value is string => typeof value === 'string'
const strings = (max: number) => (value: unknown): boolean => Array.isArray(value) && value.length <= max && value.every(isString)

function validObject(value: unknown): boolean {
  if (value === null) return true
  if (!isObj(value)) return false
  const metadata = get(value, 'metadata')
  const spec = get(value, 'spec')
  return optional(metadata, (m) => isObj(m) && optional(get(m, 'name'), isString)) &&
    optional(spec, (s) => isObj(s) && optional(get(s, 'cidrs'), strings(16)) && optional(get(s, 'type'), isString) &&
      optional(get(s, 'clusterIP'), isString) && optional(get(s, 'ipFamilies'), strings(2)))
}

function validReview(review: unknown): boolean {
  if (!isObj(review) || get(review, 'apiVersion') !== 'admission.k8s.io/v1' || get(review, 'kind') !== 'AdmissionReview') return false
  const request = get(review, 'request')
  if (!isObj(request)) return false
  const uid = get(request, 'uid')
  const kind = get(request, 'kind')
  const userInfo = get(request, 'userInfo')
  return isString(uid) && uid.length >= 1 && uid.length <= 128 &&
    isObj(kind) && isString(get(kind, 'group')) && isString(get(kind, 'version')) && isString(get(kind, 'kind')) &&
    ['CREATE', 'UPDATE', 'DELETE', 'CONNECT'].includes(get(request, 'operation') as string) &&
    optional(get(request, 'subResource'), isString) && optional(get(request, 'name'), isString) && optional(get(request, 'namespace'), isString) &&
    optional(userInfo, (u) => isObj(u) && optional(get(u, 'username'), isString) && optional(get(u, 'groups'), strings(10_000))) &&
    optional(get(request, 'object'), validObject) && optional(get(request, 'oldObject'), validObject) &&
    optional(get(request, 'dryRun'), (d) => typeof d === 'boolean')
}

export function referenceDecode(text: string): ReferenceDecoded {
  let review: unknown
  try {
    review = JSON.parse(text)
  } catch {
    return { code: 'SCG_INVALID_JSON', uid: '' }
  }
  const request = isObj(review) ? get(review, 'request') : undefined
  const rawUID = isObj(request) ? get(request, 'uid') : undefined
  const uid = isString(rawUID) ? rawUID.slice(0, 128) : ''
  if (!validReview(review) || !isObj(request)) return { code: 'SCG_INVALID_REVIEW', uid }

  const kind = get(request, 'kind') as Obj
  const subResource = get(request, 'subResource') as string | undefined
  const object = get(request, 'object') as Obj | null | undefined
  const oldObject = get(request, 'oldObject') as Obj | null | undefined
  const metadataName = (o: Obj | null | undefined): string | undefined => (isObj(o) ? get(o, 'metadata') as Obj | undefined : undefined)?.['name'] as string | undefined
  const spec = (o: Obj | null | undefined): Obj => (isObj(o) ? (get(o, 'spec') as Obj | undefined) ?? {} : {})
  const requestName = get(request, 'name') as string | undefined

  const operation = get(request, 'operation')
  if (kind['group'] === '' && kind['version'] === 'v1' && kind['kind'] === 'Service' && (operation === 'CREATE' || operation === 'UPDATE') && !subResource) {
    const familiesOf = (o: Obj | null | undefined): Family[] | undefined => {
      const s = spec(o)
      if (s['type'] === 'ExternalName' || s['clusterIP'] === 'None') return []
      const families = ((s['ipFamilies'] as string[] | undefined) ?? []).filter((family): family is Family => family === 'IPv4' || family === 'IPv6')
      return families.length > 0 ? families : undefined
    }
    const service: ServiceReviewRequest = { operation, namespace: (get(request, 'namespace') as string | undefined) ?? '', name: requestName ?? metadataName(object) ?? '', families: familiesOf(object) }
    return { code: 'ok', uid, decoded: { ok: true, uid, service: operation === 'UPDATE' ? { ...service, held: familiesOf(oldObject) } : service } }
  }
  if (kind['group'] !== 'networking.k8s.io' || kind['kind'] !== 'ServiceCIDR' || !['v1', 'v1beta1', 'v1alpha1'].includes(kind['version'] as string) || (subResource ?? '') !== '') {
    return { code: 'SCG_UNSUPPORTED_RESOURCE', uid }
  }
  const name = requestName ?? metadataName(object) ?? metadataName(oldObject) ?? ''
  const toObject = (o: Obj | null | undefined): { name: string, cidrs: readonly string[] } | undefined =>
    isObj(o) ? { name: metadataName(o) ?? name, cidrs: (spec(o)['cidrs'] as string[] | undefined) ?? [] } : undefined
  const userInfo = (get(request, 'userInfo') as Obj | undefined) ?? {}
  return {
    code: 'ok',
    uid,
    decoded: {
      ok: true,
      uid,
      request: {
        operation: get(request, 'operation') as Operation,
        name,
        userInfo: { username: (get(userInfo, 'username') as string | undefined) ?? '', groups: (get(userInfo, 'groups') as string[] | undefined) ?? [] },
        object: toObject(object),
        oldObject: toObject(oldObject),
        dryRun: (get(request, 'dryRun') as boolean | undefined) ?? false,
      },
    },
  }
}
