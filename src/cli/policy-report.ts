// The audit as a wgpolicyk8s.io/v1alpha2 ClusterPolicyReport, the object Kyverno, Kubewarden and
// Trivy write and Policy Reporter shows (ServiceCIDRs are cluster-scoped, so a ClusterPolicyReport).
// Fields as the wg-policy-prototypes API defines them (policy-report/apis/wgpolicyk8s.io/v1alpha2):
// results[] of {source, policy, rule, category, severity, timestamp {seconds, nanos}, result
// (pass|fail|warn|error|skip), scored, resources[] (ObjectReference), message, properties}, and a
// summary counting results by outcome. Pure: the time of the audit is passed in.

import type { AuditReport, AuditedServiceCIDR } from '../policy/audit.ts'
import { holder } from '../policy/rules/in-use.ts'
import type { Policy, RuleName } from '../policy/types.ts'

export const reportName = 'servicecidr-guard'
const source = 'servicecidr-guard'
const category = 'Service IP ranges'

type Outcome = 'pass' | 'fail' | 'warn' | 'error' | 'skip'
/** high, medium and low: the levels every version of the CRD accepts (critical and info came later). */
type Severity = 'high' | 'medium' | 'low'

interface ObjectReference {
  readonly apiVersion: string
  readonly kind: string
  readonly name: string
}

export interface PolicyReportResult {
  readonly source: string
  readonly policy: string
  readonly rule: string
  readonly category: string
  readonly severity: Severity
  readonly timestamp: { readonly seconds: number, readonly nanos: number }
  readonly result: Outcome
  readonly scored: boolean
  readonly resources: readonly ObjectReference[]
  readonly message: string
  readonly properties?: Readonly<Record<string, string>>
}

export interface ClusterPolicyReport {
  readonly apiVersion: 'wgpolicyk8s.io/v1alpha2'
  readonly kind: 'ClusterPolicyReport'
  readonly metadata: { readonly name: string, readonly labels: Record<string, string>, readonly annotations?: Record<string, string> }
  readonly summary: Record<Outcome, number>
  readonly results: readonly PolicyReportResult[]
}

const severity: Partial<Record<RuleName | 'OrphanedIPAddress' | 'ApiserverDefault' | 'Exempt', Severity>> = {
  ValidCIDR: 'high',
  ValidName: 'high',
  AllowedRanges: 'high',
  DeniedRanges: 'high',
  Overlap: 'medium',
  OrphanedIPAddress: 'medium',
  PrefixLength: 'low',
  ApiserverDefault: 'low',
  Exempt: 'low',
}

/** The rules the policy sets for a ServiceCIDR that exists: one result each. */
function rulesOf(policy: Policy): RuleName[] {
  return [
    ...(policy.allowedRanges === undefined ? [] : ['AllowedRanges' as const]),
    ...(policy.deniedRanges.length === 0 ? [] : ['DeniedRanges' as const]),
    ...(Object.keys(policy.prefixLength).length === 0 ? [] : ['PrefixLength' as const]),
    ...(policy.overlap === 'Allow' ? [] : ['Overlap' as const]),
  ]
}

function serviceCIDRProperties({ record, utilisation }: AuditedServiceCIDR): Record<string, string> {
  const properties: Record<string, string> = { cidrs: [...record.cidrs.map((cidr) => cidr.text), ...record.invalid].join(', ') }
  if (utilisation.length > 0) {
    properties['utilisation'] = utilisation
      .map(({ cidr, inUse, usable, percent }) => `${cidr.text}: ${String(inUse)} of ${usable.toString()} usable addresses${percent === undefined ? '' : ` (${percent.toFixed(1)}%)`}`)
      .join('; ')
  }
  if (record.deleting) properties['terminating'] = 'true'
  return properties
}

/** The results for one ServiceCIDR: a skip when it is exempt, else one per rule, pass or not. */
function serviceCIDRResults(policy: Policy, audited: AuditedServiceCIDR, timestamp: PolicyReportResult['timestamp']): PolicyReportResult[] {
  const { record, decision } = audited
  const resources = [{ apiVersion: 'networking.k8s.io/v1', kind: 'ServiceCIDR', name: record.name }]
  const properties = serviceCIDRProperties(audited)
  const result = (rule: string, outcome: Outcome, message: string): PolicyReportResult => ({
    policy: reportName, rule, result: outcome, severity: severity[rule as RuleName] ?? 'medium', message, resources, properties, category, source, scored: true, timestamp,
  })
  if (decision.bypass === 'ApiserverDefault') return [result('ApiserverDefault', 'skip', 'kube-apiserver\'s default ServiceCIDR (from --service-cluster-ip-range): never checked')]
  if (decision.bypass === 'Exempt') return [result('Exempt', 'skip', 'the auditing user is exempt by spec.exemptions')]
  const invalid = (['ValidName', 'ValidCIDR'] as const).filter((rule) => decision.violations.some((violation) => violation.rule === rule))
  return [...invalid, ...rulesOf(policy)].map((rule) => {
    const broken = decision.violations.filter((violation) => violation.rule === rule)
    if (broken.length === 0) return result(rule, 'pass', `ServiceCIDR "${record.name}" passes ${rule}`)
    // Under enforcement Warn or Audit the cluster admits it: a finding, not scored as a failure.
    return result(rule, decision.allowed ? 'warn' : 'fail', broken.map((violation) => violation.message).join('; '))
  })
}

/** Serialized results above this are too close to etcd's 1.5 MiB object limit: passes are left out. */
const maxResultBytes = 1 << 20

/**
 * The ClusterPolicyReport of an audit. `context` names the kubeconfig context a fleet audit read,
 * as an annotation. If the results would not fit in one object, the passing ones are left out (and
 * counted in an annotation); if the others still do not fit, those past the limit are left out
 * too (the ServiceCIDRs' come first, the orphans' last), and counted in another. The summary
 * counts them all.
 */
export function clusterPolicyReport(policy: Policy, report: AuditReport, now: Date, context?: string): ClusterPolicyReport {
  const timestamp = { seconds: Math.floor(now.getTime() / 1000), nanos: 0 }
  const results: PolicyReportResult[] = report.serviceCIDRs.flatMap((audited) => serviceCIDRResults(policy, audited, timestamp))
  for (const address of report.orphans) {
    results.push({
      policy: reportName,
      rule: 'OrphanedIPAddress',
      result: 'fail',
      severity: 'medium',
      message: `${holder(address)} lies in no ServiceCIDR: create a ServiceCIDR that contains ${address.name}, or re-create the Service`,
      resources: [{ apiVersion: 'networking.k8s.io/v1', kind: 'IPAddress', name: address.name }],
      category,
      source,
      scored: true,
      timestamp,
    })
  }
  const summary: Record<Outcome, number> = { pass: 0, fail: 0, warn: 0, error: 0, skip: 0 }
  for (const result of results) summary[result.result]++
  const annotations: Record<string, string> = {}
  if (context !== undefined) annotations['servicecidr-guard.dev/context'] = context
  let kept = results
  if (JSON.stringify(results).length > maxResultBytes) {
    kept = results.filter((result) => result.result !== 'pass')
    annotations['servicecidr-guard.dev/omitted-pass-results'] = String(results.length - kept.length)
    let bytes = 2
    const fits = kept.findIndex((result) => (bytes += JSON.stringify(result).length + 1) > maxResultBytes)
    if (fits >= 0) {
      annotations['servicecidr-guard.dev/omitted-results'] = String(kept.length - fits)
      kept = kept.slice(0, fits)
    }
  }
  return {
    apiVersion: 'wgpolicyk8s.io/v1alpha2',
    kind: 'ClusterPolicyReport',
    metadata: {
      name: reportName,
      labels: { 'app.kubernetes.io/managed-by': 'servicecidr-guard' },
      ...(Object.keys(annotations).length === 0 ? {} : { annotations }),
    },
    summary,
    results: kept,
  }
}
