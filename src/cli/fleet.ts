// Auditing several clusters in one run (`audit --context A --context B`, `--all-contexts`): each
// cluster read in parallel, at most `parallel` at once, and a cluster that cannot be read is a row
// with its error, never the end of the run. Printing: one row per cluster and a fleet summary, or
// one JSON document.

import type { AuditReport } from '../policy/audit.ts'
import type { UserInfo } from '../policy/types.ts'
import { auditFindings, auditJSON } from './output.ts'

/** One cluster of the fleet: its report, or why it has none. */
export interface ClusterAudit {
  readonly context: string
  readonly server: string
  readonly report: AuditReport | undefined
  readonly error: string | undefined
}

/** Runs `run` on every item, at most `limit` at a time, and answers the results in the items' order. */
export async function mapBounded<T, R>(items: readonly T[], limit: number, run: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array<R>(items.length)
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const index = next++
      results[index] = await run(items[index] as T)
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
  return results
}

export interface FleetSummary {
  readonly clusters: number
  readonly clean: number
  readonly withFindings: number
  readonly unreadable: number
  readonly serviceCIDRs: number
  readonly denied: number
  readonly orphans: number
}

export function fleetSummary(audits: readonly ClusterAudit[]): FleetSummary {
  const read = audits.flatMap((audit) => (audit.report === undefined ? [] : [audit.report]))
  return {
    clusters: audits.length,
    clean: read.filter((report) => auditFindings(report) === 0).length,
    withFindings: read.filter((report) => auditFindings(report) > 0).length,
    unreadable: audits.length - read.length,
    serviceCIDRs: read.reduce((sum, report) => sum + report.serviceCIDRs.length, 0),
    denied: read.reduce((sum, report) => sum + report.serviceCIDRs.filter(({ decision }) => !decision.allowed).length, 0),
    orphans: read.reduce((sum, report) => sum + report.orphans.length, 0),
  }
}

const plural = (count: number, word: string, many = `${word}s`): string => `${String(count)} ${count === 1 ? word : many}`

function status(audit: ClusterAudit): string {
  if (audit.report === undefined) return `ERROR ${audit.error ?? ''}`
  const findings = auditFindings(audit.report)
  return findings === 0 ? 'clean' : plural(findings, 'finding')
}

/** One row per cluster, in the order asked, and the fleet summary. */
export function fleetText(audits: readonly ClusterAudit[], user: UserInfo): string {
  const header = ['CONTEXT', 'SERVER', 'SERVICECIDRS', 'DENIED', 'ORPHANS', 'STATUS']
  const rows = audits.map((audit) => {
    const report = audit.report
    const denied = report?.serviceCIDRs.filter(({ decision }) => !decision.allowed).length
    return [audit.context, audit.server, String(report?.serviceCIDRs.length ?? '-'), String(denied ?? '-'), String(report?.orphans.length ?? '-'), status(audit)]
  })
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]?.length ?? 0)))
  // The last column is not padded: it is the one that runs long (an error).
  const line = (cells: readonly string[]): string => cells.map((cell, column) => (column === cells.length - 1 ? cell : cell.padEnd(widths[column] ?? 0))).join('  ')
  const summary = fleetSummary(audits)
  const findings = summary.withFindings === 0
    ? ''
    : ` (${plural(summary.denied, 'ServiceCIDR')} the policy would deny, ${plural(summary.orphans, 'orphaned IPAddress', 'orphaned IPAddresses')})`
  return [
    line(header),
    ...rows.map(line),
    '',
    `${plural(summary.clusters, 'cluster')} audited as ${user.username}: ${String(summary.clean)} clean, ${String(summary.withFindings)} with findings${findings}, ${String(summary.unreadable)} could not be read`,
    '',
  ].join('\n')
}

/** `audit -o json` of a fleet: every cluster's report (as a single audit prints it) or its error. */
export function fleetJSON(audits: readonly ClusterAudit[], user: UserInfo): string {
  return `${JSON.stringify({
    apiVersion: 'servicecidr-guard/v1alpha1',
    kind: 'FleetAuditReport',
    user: { username: user.username, groups: user.groups },
    clusters: audits.map((audit) => ({
      context: audit.context,
      server: audit.server,
      error: audit.error ?? null,
      report: audit.report === undefined ? null : auditJSON(audit.report),
    })),
    summary: fleetSummary(audits),
  }, null, 2)}\n`
}
