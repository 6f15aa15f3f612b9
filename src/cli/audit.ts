// `servicecidr-guard audit`: the cluster as it stands, against the policy. Fetches (or reads) the
// ServiceCIDRs and IPAddresses and prints the report that src/policy/audit.ts computes.

import { Command } from 'commander'
import { auditCluster } from '../policy/audit.ts'
import { exitCodes, UsageError } from './errors.ts'
import { loadCluster, loadPolicy, repeatable, reviewUser } from './input.ts'
import type { CommandContext } from './io.ts'
import { auditFindings, formatAudit, outputOption, type Format } from './output.ts'

interface Flags {
  policy: string
  kubeconfig?: string
  cluster?: string[]
  as?: string
  asGroup?: string[]
  output: Format
}

export function auditCommand(context: CommandContext): Command {
  return new Command('audit')
    .description('Check every existing ServiceCIDR against the policy, find IPAddresses no ServiceCIDR contains, and show how full each CIDR is.')
    .requiredOption('--policy <file>', 'policy file (YAML or JSON)')
    .option('--kubeconfig <file>', 'kubeconfig of the cluster to read (default: in-cluster, else $KUBECONFIG or ~/.kube/config)')
    .option('--cluster <file>', 'read the cluster from files instead, as `kubectl get servicecidrs,ipaddresses -o yaml` prints them (repeatable)', repeatable)
    .option('--as <user>', 'review as this user (default servicecidr-guard:audit, whom the policy\'s exemptions do not name)')
    .option('--as-group <group>', 'review with this group (repeatable)', repeatable)
    .addOption(outputOption())
    .addHelpText('after', `
Each ServiceCIDR is reviewed as a CREATE against all the others, so out-of-policy ranges and
overlaps among existing ServiceCIDRs show up. kube-apiserver's default ServiceCIDR "kubernetes"
comes from --service-cluster-ip-range and is reported as exempt, with its utilisation. Reviews are
made as servicecidr-guard:audit with no groups, so spec.exemptions do not apply unless --as USER
[--as-group GROUP] names someone they exempt.

Orphans are allocator-managed IPAddresses that no ServiceCIDR contains (network and IPv4 broadcast
addresses are never contained). Utilisation counts them inside each CIDR against the addresses
the allocator can hand out.

Exit status: 0 nothing found, 1 a ServiceCIDR the policy would deny or an orphaned IPAddress,
2 usage, policy, input or cluster access error.

Examples:
  servicecidr-guard audit --policy policy.yaml
  servicecidr-guard audit --policy policy.yaml --kubeconfig ~/.kube/prod -o json
  servicecidr-guard audit --policy policy.yaml --cluster dump.yaml`)
    .action(async (flags: Flags) => {
      const files = flags.cluster ?? []
      if (flags.kubeconfig !== undefined && files.length > 0) {
        throw new UsageError('--kubeconfig reads a live cluster and --cluster reads files: give one or the other')
      }
      const policy = await loadPolicy(context.io, flags.policy)
      const state = files.length > 0 ? await loadCluster(context.io, files) : await context.io.readCluster(flags.kubeconfig)
      const user = reviewUser('audit', flags.as, flags.asGroup ?? [])
      const report = auditCluster(policy, state, user)
      context.io.stdout(formatAudit(report, user, flags.output))
      context.exitCode = auditFindings(report) === 0 ? exitCodes.ok : exitCodes.denied
    })
}
