// `servicecidr-guard check`: would these ServiceCIDRs be admitted, and these deletions? Offline, with
// the engine the webhook runs, against a cluster described by files.

import { Command } from 'commander'
import type { Located } from '../cluster/files.ts'
import { decide } from '../policy/engine.ts'
import { toServiceCIDRRecord, type ClusterState } from '../policy/state.ts'
import type { Policy, ReviewRequest, UserInfo } from '../policy/types.ts'
import { exitCodes, UsageError } from './errors.ts'
import { displayName, loadCluster, loadManifests, loadPolicy, repeatable, reviewUser } from './input.ts'
import type { CommandContext } from './io.ts'
import { checkJUnit, formatCheck, outputOption, type Format, type Reviewed } from './output.ts'

/**
 * Reviews each manifest in order, then each deletion, as kube-apiserver would send them: CREATE for
 * a new name; UPDATE with the existing object as oldObject for a name that exists (what `kubectl
 * apply` sends); DELETE with the existing object as oldObject. Whatever is admitted changes `state`
 * before the next review, as it would change the cluster.
 */
export function runChecks(policy: Policy, state: ClusterState, manifests: readonly Located[], deletes: readonly string[], userInfo: UserInfo): Reviewed[] {
  const reviewed: Reviewed[] = []
  for (const { object, location } of manifests) {
    const name = object.metadata?.name ?? ''
    const existing = state.serviceCIDR(name)
    const request: ReviewRequest = {
      operation: existing === undefined ? 'CREATE' : 'UPDATE',
      name,
      userInfo,
      object: { name, cidrs: object.spec?.cidrs ?? [] },
      oldObject: existing && { name, cidrs: existing.cidrs.map((cidr) => cidr.text) },
      dryRun: false,
    }
    const decision = decide(policy, state, request)
    const record = toServiceCIDRRecord(object)
    if (decision.allowed && record !== undefined) state.upsertServiceCIDR(record)
    reviewed.push({ request, decision, location })
  }
  for (const name of deletes) {
    const existing = state.serviceCIDR(name)
    if (existing === undefined) {
      throw new UsageError(`--delete ${name}: there is no ServiceCIDR "${name}" in the --cluster files or the admitted manifests`)
    }
    const request: ReviewRequest = {
      operation: 'DELETE',
      name,
      userInfo,
      object: undefined,
      oldObject: { name, cidrs: existing.cidrs.map((cidr) => cidr.text) },
      dryRun: false,
    }
    const decision = decide(policy, state, request)
    if (decision.allowed) state.removeServiceCIDR(name)
    reviewed.push({ request, decision, location: undefined })
  }
  return reviewed
}

interface Flags {
  policy: string
  cluster?: string[]
  delete?: string[]
  as?: string
  asGroup?: string[]
  output: Format | 'junit'
}

export function checkCommand(context: CommandContext): Command {
  return new Command('check')
    .description('Would these ServiceCIDRs be admitted, and these deletions? An offline what-if with the webhook\'s own policy engine.')
    .argument('[manifest...]', 'files of ServiceCIDRs to create (YAML or JSON, multi-document, a List; - for stdin), checked in order')
    .requiredOption('--policy <file>', 'policy file (YAML or JSON)')
    .option('--cluster <file>', 'existing ServiceCIDRs and IPAddresses, as `kubectl get servicecidrs,ipaddresses -o yaml` prints them (repeatable)', repeatable)
    .option('--delete <name>', 'also check deleting this ServiceCIDR, after the manifests (repeatable)', repeatable)
    .option('--as <user>', 'review as this user (default servicecidr-guard:check, whom the policy\'s exemptions do not name)')
    .option('--as-group <group>', 'review with this group (repeatable)', repeatable)
    .addOption(outputOption(['text', 'json', 'junit']))
    .addHelpText('after', `
Each manifest is reviewed as kube-apiserver would send it to the webhook: CREATE, or UPDATE when
--cluster already holds a ServiceCIDR of that name (what kubectl apply does). Each admitted one
joins the cluster the next is checked against; deletions are checked last, in the order given.
Reviews are made as servicecidr-guard:check with no groups, so spec.exemptions do not apply
unless --as USER [--as-group GROUP] names someone they exempt.

-o junit prints JUnit XML, which CI systems show as test results: one test case a request, a
denial its failure.

Exit status: 0 all admitted, 1 any denied, 2 usage, policy or input error.

Examples:
  kubectl get servicecidrs,ipaddresses -o json > dump.json
  servicecidr-guard check --policy policy.yaml --cluster dump.json new-servicecidr.yaml
  servicecidr-guard check --policy policy.yaml --cluster dump.json --delete old-range -o json
  servicecidr-guard check --policy policy.yaml -o junit servicecidrs/*.yaml > check.xml
  cat servicecidr.yaml | servicecidr-guard check --policy policy.yaml -`)
    .action(async (manifests: string[], flags: Flags) => {
      if (manifests.length === 0 && (flags.delete ?? []).length === 0) {
        throw new UsageError('nothing to check: name manifest files (or - for stdin), or --delete NAME')
      }
      const policy = await loadPolicy(context.io, flags.policy)
      const state = await loadCluster(context.io, flags.cluster ?? [])
      const objects = await loadManifests(context.io, manifests)
      // As `kubectl apply` refuses files without objects: an empty file or standard input (a
      // generator that failed upstream of a pipe) must not pass a CI gate as "0 checked".
      if (objects.length === 0 && (flags.delete ?? []).length === 0) {
        throw new UsageError(`nothing to check: ${manifests.map(displayName).join(', ')} ${manifests.length === 1 ? 'holds' : 'hold'} no ServiceCIDR`)
      }
      const user = reviewUser('check', flags.as, flags.asGroup ?? [])
      const reviewed = runChecks(policy, state, objects, flags.delete ?? [], user)
      context.io.stdout(flags.output === 'junit' ? checkJUnit({ user, reviewed }) : formatCheck({ user, reviewed }, flags.output))
      context.exitCode = reviewed.every(({ decision }) => decision.allowed) ? exitCodes.ok : exitCodes.denied
    })
}
