// `servicecidr-guard audit`: the cluster as it stands, against the policy. Fetches (or reads) the
// ServiceCIDRs and IPAddresses and prints the report that src/policy/audit.ts computes; for one
// cluster, or for several kubeconfig contexts at once (src/cli/fleet.ts). `-o policyreport` prints
// it as a ClusterPolicyReport, which `--apply` writes to the cluster itself.

import { Command, InvalidArgumentError, Option } from 'commander'
import { writeYAMLDocuments } from '../config/yaml.ts'
import { auditCluster, type AuditReport } from '../policy/audit.ts'
import type { Policy, UserInfo } from '../policy/types.ts'
import { exitCodes, UsageError } from './errors.ts'
import { fleetJSON, fleetText, mapBounded, type ClusterAudit } from './fleet.ts'
import { loadCluster, loadPolicy, maxSeconds, repeatable, reviewUser } from './input.ts'
import { ClusterAccessError, type ClusterTarget, type CommandContext } from './io.ts'
import { auditCases, auditFindings, auditJUnit, formatAudit, outputOption } from './output.ts'
import { clusterPolicyReport, reportName, type ClusterPolicyReport } from './policy-report.ts'

type AuditFormat = 'text' | 'json' | 'policyreport' | 'junit'

interface Flags {
  policy: string
  kubeconfig?: string
  cluster?: string[]
  context?: string[]
  allContexts?: boolean
  parallel: number
  timeout: number
  as?: string
  asGroup?: string[]
  output: AuditFormat
  apply?: boolean
}

function positive(what: string, most = Number.MAX_SAFE_INTEGER): (value: string) => number {
  return (value) => {
    const parsed = Number(value)
    if (!Number.isInteger(parsed) || parsed < 1 || parsed > most) {
      throw new InvalidArgumentError(`must be a whole number of ${what}, 1 or more${most === Number.MAX_SAFE_INTEGER ? '' : `, at most ${String(most)}`}`)
    }
    return parsed
  }
}

const summaryText = ({ summary }: ClusterPolicyReport): string =>
  `${String(summary.pass)} pass, ${String(summary.fail)} fail, ${String(summary.warn)} warn, ${String(summary.error)} error, ${String(summary.skip)} skip`

/** One report in the format asked for (not for fleets, which print rows). */
function printOne(context: CommandContext, policy: Policy, report: AuditReport, user: UserInfo, format: AuditFormat): void {
  if (format === 'policyreport') context.io.stdout(writeYAMLDocuments([clusterPolicyReport(policy, report, context.io.now())]))
  else if (format === 'junit') context.io.stdout(auditJUnit([{ name: `servicecidr-guard audit as ${user.username}`, timestamp: context.io.now(), cases: auditCases(report) }]))
  else context.io.stdout(formatAudit(report, user, format))
}

async function auditFleet(context: CommandContext, policy: Policy, user: UserInfo, flags: Flags): Promise<void> {
  const known = context.io.contexts(flags.kubeconfig)
  // An invalid context is not a cluster, and kubectl skips it too; named with --context, it is a row with why.
  const names = flags.allContexts === true ? known.filter((entry) => entry.invalid === undefined).map((entry) => entry.name) : [...new Set(flags.context)]
  const unknown = names.filter((name) => !known.some((entry) => entry.name === name))
  if (unknown.length > 0) {
    throw new UsageError(`the kubeconfig has no context ${unknown.map((name) => `"${name}"`).join(', ')} (it has: ${known.map((entry) => entry.name).join(', ') || 'none'})`)
  }
  if (names.length === 0) throw new UsageError('the kubeconfig has no contexts to audit')
  const now = context.io.now()
  const reports = new Map<string, ClusterPolicyReport>()
  const audits = await mapBounded(names, flags.parallel, async (name): Promise<ClusterAudit> => {
    const server = known.find((entry) => entry.name === name)?.server ?? ''
    const target: ClusterTarget = { kubeconfig: flags.kubeconfig, context: name, timeoutMs: flags.timeout * 1000 }
    let report: AuditReport
    try {
      report = auditCluster(policy, await context.io.readCluster(target), user)
    } catch (error) {
      if (error instanceof ClusterAccessError) return { context: name, server, report: undefined, error: error.message }
      throw error
    }
    if (flags.output !== 'policyreport') return { context: name, server, report, error: undefined }
    const policyReport = clusterPolicyReport(policy, report, now, name)
    reports.set(name, policyReport)
    if (flags.apply === true) {
      try {
        await context.io.applyReport(target, policyReport)
      } catch (error) {
        if (error instanceof ClusterAccessError) return { context: name, server, report: undefined, error: `audited, but the report could not be applied: ${error.message}` }
        throw error
      }
    }
    return { context: name, server, report, error: undefined }
  })

  switch (flags.output) {
    case 'text':
      context.io.stdout(fleetText(audits, user))
      break
    case 'json':
      context.io.stdout(fleetJSON(audits, user))
      break
    case 'junit':
      context.io.stdout(auditJUnit(audits.map((audit) => ({
        name: audit.context,
        timestamp: now,
        cases: audit.report === undefined
          ? [{ classname: 'cluster', name: `read ${audit.server}`, error: { type: 'ClusterAccessError', message: audit.error ?? '' } }]
          : auditCases(audit.report),
      }))))
      break
    case 'policyreport':
      if (flags.apply === true) {
        context.io.stdout(audits.map((audit) => {
          const applied = reports.get(audit.context)
          return audit.error === undefined && applied !== undefined
            ? `${audit.context}: ClusterPolicyReport ${reportName} applied (${summaryText(applied)})\n`
            : `${audit.context}: ERROR ${audit.error ?? ''}\n`
        }).join(''))
      } else {
        context.io.stdout(writeYAMLDocuments([...reports.values()]))
      }
      for (const audit of audits) if (audit.error !== undefined && flags.apply !== true) context.io.stderr(`servicecidr-guard: context ${audit.context}: ${audit.error}\n`)
      break
  }
  const findings = audits.some((audit) => audit.report !== undefined && auditFindings(audit.report) > 0)
  context.exitCode = audits.some((audit) => audit.error !== undefined)
    ? exitCodes.unreadable
    : findings && flags.apply !== true ? exitCodes.denied : exitCodes.ok
}

export function auditCommand(context: CommandContext): Command {
  return new Command('audit')
    .description('Check every existing ServiceCIDR against the policy, find IPAddresses no ServiceCIDR contains, and show how full each CIDR is; in one cluster or a fleet.')
    .requiredOption('--policy <file>', 'policy file (YAML or JSON)')
    .option('--kubeconfig <file>', 'kubeconfig of the cluster to read (default: in-cluster, else $KUBECONFIG or ~/.kube/config)')
    .option('--context <name>', 'audit this context of the kubeconfig; repeat it for a fleet (one row per cluster)', repeatable)
    .addOption(new Option('--all-contexts', 'audit every context of the kubeconfig').conflicts('context'))
    .option('--parallel <n>', 'how many clusters of a fleet to read at once', positive('clusters'), 4)
    .option('--timeout <seconds>', 'give up on a cluster that has not answered within this long', positive('seconds', maxSeconds), 30)
    .option('--cluster <file>', 'read the cluster from files instead, as `kubectl get servicecidrs,ipaddresses -o yaml` prints them (repeatable)', repeatable)
    .option('--as <user>', 'review as this user (default servicecidr-guard:audit, whom the policy\'s exemptions do not name)')
    .option('--as-group <group>', 'review with this group (repeatable)', repeatable)
    .addOption(outputOption(['text', 'json', 'policyreport', 'junit']))
    .option('--apply', 'with -o policyreport: write the ClusterPolicyReport to the cluster (server-side apply) instead of printing it')
    .addHelpText('after', `
Each ServiceCIDR is reviewed as a CREATE against all the others, so out-of-policy ranges and
overlaps among existing ServiceCIDRs show up. kube-apiserver's default ServiceCIDR "kubernetes"
comes from --service-cluster-ip-range and is reported as exempt, with its utilisation. Reviews are
made as servicecidr-guard:audit with no groups, so spec.exemptions do not apply unless --as USER
[--as-group GROUP] names someone they exempt.

Orphans are allocator-managed IPAddresses that no ServiceCIDR contains (network and IPv4 broadcast
addresses are never contained). Utilisation counts them inside each CIDR against the addresses
the allocator can hand out.

--context (repeated) or --all-contexts audits a fleet: one row per cluster and a summary (-o json:
every cluster's report). A cluster that cannot be read is a row with its error.

-o policyreport prints a wgpolicyk8s.io/v1alpha2 ClusterPolicyReport (what Policy Reporter shows);
-o junit prints JUnit XML for CI.

Exit status: 0 nothing found, 1 a ServiceCIDR the policy would deny or an orphaned IPAddress,
2 usage, policy or input error, or the one cluster could not be read, 3 a cluster of a fleet could
not be read (whatever the others hold). With --apply, findings go into the report: 0 once applied.

Examples:
  servicecidr-guard audit --policy policy.yaml
  servicecidr-guard audit --policy policy.yaml --kubeconfig ~/.kube/prod -o json
  servicecidr-guard audit --policy policy.yaml --all-contexts
  servicecidr-guard audit --policy policy.yaml --context prod-eu --context prod-us -o junit > audit.xml
  servicecidr-guard audit --policy policy.yaml -o policyreport --apply
  servicecidr-guard audit --policy policy.yaml --cluster dump.yaml`)
    .action(async (flags: Flags) => {
      const files = flags.cluster ?? []
      const fleet = flags.allContexts === true || (flags.context ?? []).length > 0
      if (files.length > 0 && (flags.kubeconfig !== undefined || fleet || flags.apply === true)) {
        throw new UsageError('--cluster reads files, and --kubeconfig, --context, --all-contexts and --apply a live cluster: give one or the other')
      }
      if (flags.apply === true && flags.output !== 'policyreport') throw new UsageError('--apply writes a ClusterPolicyReport: use it with -o policyreport')
      const policy = await loadPolicy(context.io, flags.policy)
      const user = reviewUser('audit', flags.as, flags.asGroup ?? [])
      if (fleet) {
        await auditFleet(context, policy, user, flags)
        return
      }
      const target: ClusterTarget = { kubeconfig: flags.kubeconfig, context: undefined, timeoutMs: flags.timeout * 1000 }
      let state
      try {
        state = files.length > 0 ? await loadCluster(context.io, files) : await context.io.readCluster(target)
      } catch (error) {
        if (error instanceof ClusterAccessError) throw new UsageError(`cannot read the cluster: ${error.message}`)
        throw error
      }
      const report = auditCluster(policy, state, user)
      if (flags.apply === true) {
        const policyReport = clusterPolicyReport(policy, report, context.io.now())
        try {
          await context.io.applyReport(target, policyReport)
        } catch (error) {
          if (error instanceof ClusterAccessError) throw new UsageError(`the cluster was audited, but the report could not be applied: ${error.message}`)
          throw error
        }
        context.io.stdout(`ClusterPolicyReport ${reportName} applied (${summaryText(policyReport)})\n`)
        context.exitCode = exitCodes.ok
        return
      }
      printOne(context, policy, report, user, flags.output)
      context.exitCode = auditFindings(report) === 0 ? exitCodes.ok : exitCodes.denied
    })
}
