import { familyOfCIDR, parseCIDR, type Family } from '../ip.ts'
import type { Violation } from '../types.ts'
import { noViolations, type CheckedCIDR } from './rule.ts'

export interface ValidatedSpec {
  readonly violations: Violation[]
  /** The CIDRs that parsed, with their field paths; the other rules check only these. */
  readonly parsed: CheckedCIDR[]
}

/** The field paths of spec.cidrs' items, of which validateSpec reads at most two. */
const cidrFields = ['spec.cidrs[0]', 'spec.cidrs[1]'] as const

/**
 * spec.cidrs as `validateServiceCIDRSpec` (kubernetes pkg/apis/networking/validation) checks it:
 * one or two CIDRs, each valid by apimachinery's IsValidCIDR, at most one per IP family. Through the
 * apiserver a webhook only sees objects that passed this already; offline checks rely on it.
 */
export function validateSpec(cidrs: readonly string[]): ValidatedSpec {
  const field = 'spec.cidrs'
  if (cidrs.length === 0) {
    return { violations: [{ rule: 'ValidCIDR', field, message: `${field}: Required value: at least one CIDR required` }], parsed: [] }
  }
  if (cidrs.length > 2) {
    return { violations: [{ rule: 'ValidCIDR', field, message: `${field}: Invalid value: may only hold up to 2 values` }], parsed: [] }
  }
  const violations: Violation[] = []
  // Sized first, as ClusterState.pendingServiceCIDRs does, and cut to the CIDRs that parse: an
  // array grown by push from empty takes room for 17 (V8's first growth), ~150 bytes, every CREATE.
  const parsed = new Array<CheckedCIDR>(cidrs.length)
  let parsedCount = 0
  // Upstream compares the families ParseCIDRSloppy reads (IPFamilyOfCIDRString), so a CIDR that
  // IsValidCIDR refuses still counts: "10.0.0.1/24" and "10.1.0.0/16" are two errors, not one.
  // A CIDR that IsValidCIDR accepts is never IPv4-mapped: its family is the one it parsed to.
  // A loop over the one or two CIDRs, their field paths written once: this runs for every CREATE.
  let first: Family | undefined
  let second: Family | undefined
  for (let index = 0; index < cidrs.length; index++) {
    const text = cidrs[index] as string
    const at = cidrFields[index] as string
    const result = parseCIDR(text)
    if (!result.ok) violations.push({ rule: 'ValidCIDR', field: at, message: `${at}: Invalid value: "${text}": ${result.error}` })
    else parsed[parsedCount++] = { field: at, prefix: result.value }
    const family = result.ok ? result.value.family : familyOfCIDR(text)
    if (index === 0) first = family
    else second = family
  }
  if (cidrs.length === 2 && first !== undefined && first === second) {
    violations.push({
      rule: 'ValidCIDR',
      field,
      message: `${field}: Invalid value: may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64`,
    })
  }
  parsed.length = parsedCount
  return { violations, parsed }
}

/** apimachinery's dns1123SubdomainFmt, anchored. */
const dns1123Subdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/

/**
 * metadata.name on CREATE as `ValidateServiceCIDR` checks it: ValidateServiceCIDRName is
 * NameIsDNSSubdomain (apimachinery IsDNS1123Subdomain), with its messages. Through the apiserver a
 * webhook only sees names that passed this already (a generateName's too: validating admission gets
 * the generated name); offline checks of manifests rely on it.
 */
export function validateName(name: string): readonly Violation[] {
  const field = 'metadata.name'
  if (name === '') return [{ rule: 'ValidName', field, message: `${field}: Required value: name or generateName is required` }]
  // A valid name, the usual case, costs no allocation.
  if (name.length <= 253 && dns1123Subdomain.test(name)) return noViolations
  const invalid = (reason: string): Violation => ({ rule: 'ValidName', field, message: `${field}: Invalid value: ${JSON.stringify(name)}: ${reason}` })
  const violations: Violation[] = []
  if (name.length > 253) violations.push(invalid('must be no more than 253 characters'))
  if (!dns1123Subdomain.test(name)) {
    violations.push(invalid('a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \'-\' or \'.\', and must start and end with an alphanumeric character (e.g. \'example.com\', regex used for validation is \'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\')'))
  }
  return violations
}

const immutable = (field: string, value: string): Violation => ({
  rule: 'ValidCIDR',
  field,
  message: `${field}: Invalid value: ${value}: field is immutable`,
})

/**
 * spec.cidrs on UPDATE as `ValidateServiceCIDRUpdate` (kubernetes pkg/apis/networking/validation)
 * checks it: unchanged, except that a ServiceCIDR with one CIDR may gain a second while keeping its
 * first (https://issues.k8s.io/131261; validateSpec then checks the second is of the other family).
 */
export function validateUpdate(oldCIDRs: readonly string[], cidrs: readonly string[]): Violation[] {
  if (oldCIDRs.length === cidrs.length) {
    return cidrs.flatMap((text, index) => (text === oldCIDRs[index] ? [] : [immutable(`spec.cidrs[${index}]`, JSON.stringify(text))]))
  }
  if (oldCIDRs.length === 1 && cidrs.length === 2) {
    const [first] = cidrs
    return first === oldCIDRs[0] ? [] : [immutable('spec.cidrs[0]', JSON.stringify(first))]
  }
  return [immutable('spec.cidrs', JSON.stringify(cidrs))]
}
