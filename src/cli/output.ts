// Printing results: human text by default, or with `-o json` one stable JSON document (its shape is
// documented in docs/cli.md), or JUnit XML for CI. Pure: results in, strings out; the commands write
// them to stdout.

import { Option } from 'commander'
import { describeLocation, type Location } from '../cluster/files.ts'
import { junitXML, type JUnitCase, type JUnitSuite } from './junit.ts'
import type { AuditReport, Utilisation } from '../policy/audit.ts'
import { violationMessages } from '../policy/engine.ts'
import type { Prefix } from '../policy/ip.ts'
import { holder } from '../policy/rules/in-use.ts'
import type { Decision, IPAddressRecord, ReviewRequest, UserInfo } from '../policy/types.ts'

export type Format = 'text' | 'json'

export const outputOption = (formats: readonly string[] = ['text', 'json']): Option =>
  new Option('-o, --output <format>', 'output format').choices(formats).default('text')

/** Every JSON document names its kind and the version of its shape. */
const apiVersion = 'servicecidr-guard/v1alpha1'

const json = (value: unknown): string => `${JSON.stringify(value, null, 2)}\n`

const plural = (count: number | bigint, word: string, many = `${word}s`): string => `${count} ${count === 1 || count === 1n ? word : many}`

/** One reviewed request: a manifest, a --delete, or an existing ServiceCIDR under audit. */
export interface Reviewed {
  readonly request: ReviewRequest
  readonly decision: Decision
  /** Where a manifest was read; undefined for --delete and for audit. */
  readonly location: Location | undefined
}

/** The CIDRs the request is about: the object's, or on DELETE the old object's. */
const cidrsOf = (request: ReviewRequest): readonly string[] => request.object?.cidrs ?? request.oldObject?.cidrs ?? []

const bypassText: Record<NonNullable<Decision['bypass']>, string> = {
  ApiserverDefault: 'exempt: kube-apiserver\'s default ServiceCIDR (from --service-cluster-ip-range)',
  Exempt: 'exempt: the user or one of its groups is in spec.exemptions',
  MetadataOnly: 'no CIDR is added: nothing to check',
  NothingToCheck: 'nothing to check',
}

function verdict(decision: Decision): string {
  if (!decision.allowed) return 'DENIED'
  return decision.bypass === 'ApiserverDefault' || decision.bypass === 'Exempt' ? 'EXEMPT' : 'ADMITTED'
}

/**
 * The free range the engine suggests, if any. The engine writes a denial's message as
 * "<subject> is not allowed by the servicecidr-guard policy: <reasons>.<suggestion>", with the
 * reasons being the violations' messages; what follows them is the suggestion.
 */
export function suggestionOf(decision: Decision): string {
  if (decision.allowed) return ''
  const reasons = `${violationMessages(decision.violations)}.`
  const at = decision.message.indexOf(reasons)
  return at < 0 ? '' : decision.message.slice(at + reasons.length).trim()
}

function decisionLines(decision: Decision): string[] {
  const lines: string[] = []
  if (decision.bypass !== undefined) lines.push(`  ${bypassText[decision.bypass]}`)
  const unenforced = decision.allowed ? ' (not enforced)' : ''
  for (const violation of decision.violations) lines.push(`  - ${violation.rule}${unenforced}: ${violation.message}`)
  const suggestion = suggestionOf(decision)
  if (suggestion !== '') lines.push(`  hint: ${suggestion}`)
  return lines
}

function reviewedBlock({ request, decision, location }: Reviewed): string[] {
  const from = location === undefined ? (request.operation === 'DELETE' ? ' (--delete)' : '') : ` (${describeLocation(location)})`
  const cidrs = cidrsOf(request)
  return [
    `${verdict(decision)} ${request.operation} ServiceCIDR "${request.name}" ${cidrs.length > 0 ? cidrs.join(', ') : '(no CIDRs)'}${from}`,
    ...decisionLines(decision),
  ]
}

const violationJSON = (decision: Decision): object[] =>
  decision.violations.map(({ rule, field, message }) => ({ rule, field, message }))

function reviewedJSON({ request, decision, location }: Reviewed): object {
  return {
    operation: request.operation,
    name: request.name,
    cidrs: cidrsOf(request),
    file: location?.file ?? null,
    document: location?.document ?? null,
    item: location?.item ?? null,
    allowed: decision.allowed,
    bypass: decision.bypass ?? null,
    violations: violationJSON(decision),
    warnings: decision.warnings,
    message: decision.message,
    suggestion: suggestionOf(decision),
  }
}

const userJSON = (user: UserInfo): object => ({ username: user.username, groups: user.groups })

export interface CheckResult {
  readonly user: UserInfo
  readonly reviewed: readonly Reviewed[]
}

function checkCase({ request, decision, location }: Reviewed): JUnitCase {
  const cidrs = cidrsOf(request)
  const where = location === undefined ? '' : ` (${describeLocation(location)})`
  const details = decisionLines(decision).map((line) => line.trim()).join('\n')
  const base = {
    classname: location?.file ?? (request.operation === 'DELETE' ? '--delete' : 'servicecidr-guard check'),
    name: `${request.operation} ServiceCIDR "${request.name}" ${cidrs.length > 0 ? cidrs.join(', ') : '(no CIDRs)'}${where}`,
    ...(location === undefined || location.file === '(stdin)' ? {} : { file: location.file }),
  }
  if (!decision.allowed) return { ...base, failure: { type: decision.violations[0]?.rule ?? 'Denied', message: decision.message, text: details } }
  if (decision.bypass === 'ApiserverDefault' || decision.bypass === 'Exempt') return { ...base, skipped: bypassText[decision.bypass] }
  return decision.violations.length > 0 ? { ...base, systemOut: details } : base
}

/** The reviews of `check` as JUnit: one test case a request, a denial its failure. */
export function checkJUnit(result: CheckResult): string {
  return junitXML('servicecidr-guard check', [{ name: `servicecidr-guard check as ${result.user.username}`, cases: result.reviewed.map(checkCase) }])
}

export function formatCheck(result: CheckResult, format: Format): string {
  const denied = result.reviewed.filter(({ decision }) => !decision.allowed).length
  const admitted = result.reviewed.length - denied
  if (format === 'json') {
    return json({
      apiVersion,
      kind: 'CheckResult',
      user: userJSON(result.user),
      decisions: result.reviewed.map(reviewedJSON),
      summary: { admitted, denied },
    })
  }
  const blocks = result.reviewed.map((reviewed) => reviewedBlock(reviewed).join('\n'))
  return `${[...blocks, `${plural(result.reviewed.length, 'request')} checked as ${result.user.username}: ${admitted} admitted, ${denied} denied`].join('\n\n')}\n`
}

function percentText(percent: number | undefined): string {
  return percent === undefined ? 'no usable addresses' : `${percent.toFixed(1)}%`
}

const utilisationLine = ({ cidr, inUse, usable, percent }: Utilisation): string =>
  `  in use: ${cidr.text}: ${inUse} of ${usable} usable addresses (${percentText(percent)})`

const utilisationJSON = ({ cidr, inUse, usable, percent }: Utilisation): object => ({
  cidr: cidr.text,
  family: cidr.family,
  inUse,
  usable: usable.toString(),
  percent: percent ?? null,
})

const orphanJSON = (address: IPAddressRecord): object => ({
  name: address.name,
  family: address.family,
  parentRef: address.parentRef === undefined ? null : { ...address.parentRef },
})

/** Audit findings: ServiceCIDRs the policy would deny, and orphaned IPAddresses. */
export const auditFindings = (report: AuditReport): number =>
  report.serviceCIDRs.filter(({ decision }) => !decision.allowed).length + report.orphans.length

/** The findings of one audit, as `audit -o json` prints them (and a fleet audit for each cluster). */
export function auditJSON(report: AuditReport): { serviceCIDRs: object[], orphans: object[], summary: { serviceCIDRs: number, denied: number, orphans: number } } {
  const denied = report.serviceCIDRs.filter(({ decision }) => !decision.allowed).length
  return {
    serviceCIDRs: report.serviceCIDRs.map(({ record, decision, utilisation }) => ({
      name: record.name,
      cidrs: [...record.cidrs.map((cidr) => cidr.text), ...record.invalid],
      terminating: record.deleting,
      allowed: decision.allowed,
      bypass: decision.bypass ?? null,
      violations: violationJSON(decision),
      utilisation: utilisation.map(utilisationJSON),
    })),
    orphans: report.orphans.map(orphanJSON),
    summary: { serviceCIDRs: report.serviceCIDRs.length, denied, orphans: report.orphans.length },
  }
}

/** The test cases of one audit: a ServiceCIDR the policy would deny, or an orphaned IPAddress, fails. */
export function auditCases(report: AuditReport): JUnitCase[] {
  const serviceCIDRs = report.serviceCIDRs.map(({ record, decision, utilisation }): JUnitCase => {
    const cidrs = [...record.cidrs.map((cidr) => cidr.text), ...record.invalid]
    const base = { classname: 'ServiceCIDR', name: `ServiceCIDR "${record.name}" ${cidrs.join(', ')}${record.deleting ? ' (Terminating)' : ''}` }
    const details = [
      ...decisionLines(decision).filter((line) => !line.startsWith('  hint: ')),
      ...utilisation.map(utilisationLine),
    ].map((line) => line.trim()).join('\n')
    if (!decision.allowed) return { ...base, failure: { type: decision.violations[0]?.rule ?? 'Denied', message: violationMessages(decision.violations), text: details } }
    if (decision.bypass === 'ApiserverDefault' || decision.bypass === 'Exempt') return { ...base, skipped: bypassText[decision.bypass], systemOut: details }
    return { ...base, systemOut: details }
  })
  const orphans = report.orphans.map((address): JUnitCase => ({
    classname: 'IPAddress',
    name: `IPAddress ${address.name}`,
    failure: { type: 'OrphanedIPAddress', message: `${holder(address)} lies in no ServiceCIDR`, text: `${holder(address)} lies in no ServiceCIDR` },
  }))
  return [...serviceCIDRs, ...orphans]
}

export function auditJUnit(suites: readonly JUnitSuite[]): string {
  return junitXML('servicecidr-guard audit', suites)
}

export function formatAudit(report: AuditReport, user: UserInfo, format: Format): string {
  const denied = report.serviceCIDRs.filter(({ decision }) => !decision.allowed).length
  if (format === 'json') {
    return json({
      apiVersion,
      kind: 'AuditReport',
      user: userJSON(user),
      ...auditJSON(report),
    })
  }
  const blocks = report.serviceCIDRs.map(({ record, decision, utilisation }) => {
    const cidrs = [...record.cidrs.map((cidr) => cidr.text), ...record.invalid]
    return [
      `${verdict(decision)} ServiceCIDR "${record.name}" ${cidrs.join(', ')}${record.deleting ? ' (Terminating)' : ''}`,
      ...decisionLines(decision).filter((line) => !line.startsWith('  hint: ')),
      ...utilisation.map(utilisationLine),
    ].join('\n')
  })
  if (report.orphans.length > 0) {
    blocks.push([
      `ORPHANED ${plural(report.orphans.length, 'IPAddress', 'IPAddresses')} in no ServiceCIDR:`,
      ...report.orphans.map((address) => `  - ${holder(address)}`),
    ].join('\n'))
  }
  const summary =
    `${plural(report.serviceCIDRs.length, 'ServiceCIDR')} audited as if created now by ${user.username}: ` +
    `${denied} would be denied; ${plural(report.orphans.length, 'orphaned IPAddress', 'orphaned IPAddresses')}`
  return `${[...blocks, summary].join('\n\n')}\n`
}

export interface PlanResult {
  readonly family: Prefix['family']
  readonly request: { readonly size: bigint } | { readonly prefixLength: number }
  /** Where the search looked: the policy's allowedRanges, or the private ranges when it has none. */
  readonly searched: { readonly from: 'allowedRanges' | 'privateRanges', readonly ranges: readonly Prefix[] }
  readonly prefixLength: number | undefined
  readonly cidr: Prefix | undefined
  readonly usable: bigint | undefined
  /** Why nothing was found; empty when a CIDR was. */
  readonly reason: string
}

export function formatPlan(result: PlanResult, format: Format): string {
  const { family, request, searched, prefixLength, cidr, usable, reason } = result
  if (format === 'json') {
    return json({
      apiVersion,
      kind: 'PlanResult',
      family,
      request: 'size' in request ? { size: request.size.toString() } : { prefixLength: request.prefixLength },
      searched: { from: searched.from, ranges: searched.ranges.map((range) => range.text) },
      prefixLength: prefixLength ?? null,
      cidr: cidr?.text ?? null,
      usable: usable?.toString() ?? null,
      reason: reason === '' ? null : reason,
    })
  }
  const ranges = searched.ranges.map((range) => range.text).join(', ') || 'none'
  const where = searched.from === 'allowedRanges'
    ? `searched spec.allowedRanges: ${ranges}`
    : `the policy sets no allowedRanges, so the private ranges were searched: ${ranges}`
  const lines = cidr === undefined || usable === undefined
    ? [`no free ${family} range fits: ${reason}`]
    : [`${cidr.text}: ${usable} usable Service addresses (${family})`]
  return `${[...lines, where].join('\n')}\n`
}
