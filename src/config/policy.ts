// The policy file: YAML or JSON, checked against policy.schema.json and then for meaning (CIDRs as
// Kubernetes would accept them, bounds in order). Every problem is reported with its path.

import { Ajv, type ErrorObject } from 'ajv'
import { parseCIDR, type Prefix } from '../policy/ip.ts'
import type { Enforcement, OverlapMode, Policy, PrefixBounds } from '../policy/types.ts'
import schema from './policy.schema.json' with { type: 'json' }
import { documentMarkerLines, parseYAMLDocuments, YAMLSyntaxError } from './yaml.ts'

/** The file as written; every field but apiVersion, kind and spec is optional. */
interface PolicyDocument {
  apiVersion: string
  kind: string
  spec: {
    allowedRanges?: string[]
    deniedRanges?: string[]
    overlap?: OverlapMode
    prefixLength?: { ipv4?: Partial<PrefixBounds>, ipv6?: Partial<PrefixBounds> }
    deletion?: { requireUnused?: boolean }
    protectedNames?: string[]
    exemptions?: { usernames?: string[], groups?: string[] }
    enforcement?: Enforcement
    capacity?: { warnWhenFreeBelow?: { ipv4?: number, ipv6?: number } }
  }
}

export class PolicyError extends Error {
  readonly problems: readonly string[]
  constructor(source: string, problems: readonly string[]) {
    super(`invalid policy ${source}:\n${problems.map((problem) => `  - ${problem}`).join('\n')}`)
    this.name = 'PolicyError'
    this.problems = problems
  }
}

const ajv = new Ajv({ allErrors: true, strict: true })
const validateDocument = ajv.compile<PolicyDocument>(schema)

/** "/spec/allowedRanges/2" -> "spec.allowedRanges[2]" */
function fieldPath(pointer: string): string {
  return pointer
    .split('/')
    .slice(1)
    .map((part) => part.replaceAll('~1', '/').replaceAll('~0', '~'))
    .reduce((path, part) => (/^\d+$/.test(part) ? `${path}[${part}]` : path === '' ? part : `${path}.${part}`), '')
}

function describeSchemaError(error: ErrorObject): string {
  const path = fieldPath(error.instancePath) || '(top level)'
  switch (error.keyword) {
    case 'additionalProperties':
      return `${path}: unknown field "${String(error.params['additionalProperty'])}"`
    case 'enum':
      return `${path}: must be one of ${(error.params['allowedValues'] as unknown[]).map((value) => JSON.stringify(value)).join(', ')}`
    case 'const':
      return `${path}: must be ${JSON.stringify(error.params['allowedValue'])}`
    case 'required':
      return `${path}: missing required field "${String(error.params['missingProperty'])}"`
    default:
      return `${path}: ${error.message ?? 'is invalid'}`
  }
}

const isObject = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

// The checks of meaning read the document as it is, schema-valid or not, and skip what has the
// wrong shape (the schema reports that), so that one run lists every problem there is to fix.

function parseRanges(field: string, texts: unknown, problems: string[]): Prefix[] {
  const ranges: Prefix[] = []
  if (!Array.isArray(texts)) return ranges
  texts.forEach((text: unknown, index) => {
    if (typeof text !== 'string') return
    const parsed = parseCIDR(text)
    if (parsed.ok) ranges.push(parsed.value)
    else problems.push(`${field}[${index}]: "${text}" is not a canonical CIDR (${parsed.error})`)
  })
  return ranges
}

function bounds(field: string, width: number, given: unknown, problems: string[]): PrefixBounds | undefined {
  if (!isObject(given)) return undefined
  const min = typeof given['min'] === 'number' ? given['min'] : 0
  const max = typeof given['max'] === 'number' ? given['max'] : width
  if (min > max) problems.push(`${field}: min /${min} is longer than max /${max}`)
  return { min, max }
}

/** Builds a Policy from a parsed document; throws PolicyError listing every problem, of shape and of meaning. */
export function policyFromObject(document: unknown, source: string): Policy {
  const valid = validateDocument(document)
  const problems = valid ? [] : (validateDocument.errors ?? []).map(describeSchemaError)
  const spec = isObject(document) && isObject(document['spec']) ? document['spec'] : {}
  const prefixLength = isObject(spec['prefixLength']) ? spec['prefixLength'] : {}
  const allowedRanges = parseRanges('spec.allowedRanges', spec['allowedRanges'], problems)
  const deniedRanges = parseRanges('spec.deniedRanges', spec['deniedRanges'], problems)
  const ipv4 = bounds('spec.prefixLength.ipv4', 32, prefixLength['ipv4'], problems)
  const ipv6 = bounds('spec.prefixLength.ipv6', 128, prefixLength['ipv6'], problems)
  if (!valid || problems.length > 0) throw new PolicyError(source, problems)

  const given = document.spec
  return {
    // Absent: anywhere. Empty: nowhere (no new ServiceCIDR passes).
    allowedRanges: given.allowedRanges === undefined ? undefined : allowedRanges,
    deniedRanges,
    overlap: given.overlap ?? 'Deny',
    prefixLength: { ...withDefined('IPv4', ipv4), ...withDefined('IPv6', ipv6) },
    deletion: { requireUnused: given.deletion?.requireUnused ?? true },
    protectedNames: given.protectedNames ?? [],
    exemptions: { usernames: given.exemptions?.usernames ?? [], groups: given.exemptions?.groups ?? [] },
    enforcement: given.enforcement ?? 'Deny',
    capacity: {
      warnWhenFreeBelow: {
        ...withDefined('IPv4', given.capacity?.warnWhenFreeBelow?.ipv4),
        ...withDefined('IPv6', given.capacity?.warnWhenFreeBelow?.ipv6),
      },
    },
  }
}

function withDefined<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V }
}

/** Parses policy text (YAML, or JSON, which is YAML too); throws PolicyError. */
export function parsePolicy(text: string, source: string): Policy {
  let documents: unknown[]
  try {
    documents = parseYAMLDocuments(text)
  } catch (error) {
    // "<what> at line L, column C": js-yaml stops at the first syntax error.
    if (error instanceof YAMLSyntaxError) throw new PolicyError(source, [error.message])
    throw error
  }
  // An empty document (a `---` with nothing after it, as concatenated files end) holds nothing:
  // skipped, as kubectl apply skips it.
  const held = documents.flatMap((document, index) => (document === null ? [] : [index]))
  const [first, second] = held
  if (second !== undefined) {
    // Document i starts at marker i, or at marker i - 1 if the file opens without one.
    const markers = documentMarkerLines(text)
    const opensWithMarker = text.split('\n').findIndex((line) => !/^\s*(#.*)?$/.test(line)) + 1 === markers[0]
    const line = markers[opensWithMarker ? second : second - 1]
    throw new PolicyError(source, [`a policy file holds one YAML document; another one starts${line === undefined ? '' : ` at line ${line}`}`])
  }
  // An empty ConfigMap key, or a file cut short on write, reads as nothing at all.
  if (first === undefined) throw new PolicyError(source, ['the file holds no policy (it is empty, or only comments); it must hold one servicecidr-guard/v1alpha1 Policy'])
  return policyFromObject(documents[first], source)
}
