// `servicecidr-guard plan`: the first free CIDR that the policy would admit, for a number of
// Service addresses or a prefix length. The search is the engine's own (src/policy/plan.ts), the one
// whose answer a denial message suggests.

import { Command, InvalidArgumentError, Option } from 'commander'
import { allocatableSize, familyWidth, shortestIPv6ServiceCIDR, type Family } from '../policy/ip.ts'
import { findFreePrefix, prefixLengthFor, privateRanges } from '../policy/plan.ts'
import type { ClusterView, Policy } from '../policy/types.ts'
import { exitCodes, UsageError } from './errors.ts'
import { loadCluster, loadPolicy, repeatable } from './input.ts'
import type { CommandContext } from './io.ts'
import { formatPlan, outputOption, type Format, type PlanResult } from './output.ts'

export function planRange(policy: Policy, view: ClusterView, family: Family, request: PlanResult['request']): PlanResult {
  const fromPolicy = policy.allowedRanges !== undefined
  const searched = {
    from: fromPolicy ? 'allowedRanges' as const : 'privateRanges' as const,
    ranges: (policy.allowedRanges ?? privateRanges).filter((range) => range.family === family),
  }
  const bounds = policy.prefixLength[family]
  const allowed = bounds === undefined ? '' : ` (the policy allows /${bounds.min} to /${bounds.max})`
  const none = (prefixLength: number | undefined, reason: string): PlanResult =>
    ({ family, request, searched, prefixLength, cidr: undefined, usable: undefined, reason })

  const search = (bits: number): PlanResult => {
    if (bounds !== undefined && (bits < bounds.min || bits > bounds.max)) return none(bits, `/${bits} is outside the policy's ${family} bounds, /${bounds.min} to /${bounds.max}`)
    if (family === 'IPv6' && bits < shortestIPv6ServiceCIDR) return none(bits, `the allocator refuses IPv6 ServiceCIDRs shorter than /${shortestIPv6ServiceCIDR}`)
    if (searched.ranges.length === 0) return none(bits, `the policy's allowedRanges hold no ${family} range`)
    const cidr = findFreePrefix(policy, view, family, bits)
    if (cidr === undefined) {
      return none(bits, `no /${bits} is left in ${searched.ranges.map((range) => range.text).join(', ')} outside the denied ranges and the existing ServiceCIDRs`)
    }
    return { family, request, searched, prefixLength: bits, cidr, usable: allocatableSize(cidr), reason: '' }
  }
  if (!('size' in request)) return search(request.prefixLength)
  const bits = prefixLengthFor(family, request.size, bounds)
  return bits === undefined ? none(undefined, `no ${family} prefix${allowed} holds ${request.size} Service addresses`) : search(bits)
}

function positiveInteger(value: string): bigint {
  if (!/^[1-9]\d*$/.test(value)) throw new InvalidArgumentError('must be a whole number of addresses, 1 or more')
  return BigInt(value)
}

function prefixLength(value: string): number {
  if (!/^\d{1,3}$/.test(value) || Number(value) > 128) throw new InvalidArgumentError('must be a prefix length (0-32 for IPv4, 0-128 for IPv6)')
  return Number(value)
}

interface Flags {
  policy: string
  cluster?: string[]
  size?: bigint
  prefixLength?: number
  family: 'ipv4' | 'ipv6'
  output: Format
}

export function planCommand(context: CommandContext): Command {
  return new Command('plan')
    .description('Suggest the first free CIDR the policy would admit: inside allowedRanges, outside deniedRanges and every existing ServiceCIDR.')
    .requiredOption('--policy <file>', 'policy file (YAML or JSON)')
    .option('--cluster <file>', 'existing ServiceCIDRs, as `kubectl get servicecidrs,ipaddresses -o yaml` prints them (repeatable)', repeatable)
    .addOption(new Option('--size <n>', 'how many Service addresses the range must hold').argParser(positiveInteger).conflicts('prefixLength'))
    .addOption(new Option('--prefix-length <l>', 'the exact prefix length wanted').argParser(prefixLength))
    .addOption(new Option('--family <family>', 'IP family').choices(['ipv4', 'ipv6']).default('ipv4'))
    .addOption(outputOption())
    .addHelpText('after', `
--size N picks the longest prefix whose usable addresses (all but the network address, and the
broadcast address for IPv4) hold N, widened to the policy's longest allowed prefix if need be.
When the policy sets no allowedRanges, the private ranges (10.0.0.0/8, 172.16.0.0/12,
192.168.0.0/16, fd00::/8) are searched, and the output says so.

Exit status: 0 a CIDR was found, 1 none fits, 2 usage, policy or input error.

Examples:
  servicecidr-guard plan --policy policy.yaml --cluster dump.yaml --size 500
  servicecidr-guard plan --policy policy.yaml --cluster dump.yaml --prefix-length 64 --family ipv6 -o json`)
    .action(async (flags: Flags) => {
      const family: Family = flags.family === 'ipv6' ? 'IPv6' : 'IPv4'
      const request = flags.size !== undefined ? { size: flags.size } : flags.prefixLength !== undefined ? { prefixLength: flags.prefixLength } : undefined
      if (request === undefined) throw new UsageError('say how large a range: --size N (Service addresses) or --prefix-length L')
      if ('prefixLength' in request && request.prefixLength > familyWidth(family)) {
        throw new UsageError(`--prefix-length ${request.prefixLength} is longer than an ${family} address (/${familyWidth(family)})`)
      }
      const policy = await loadPolicy(context.io, flags.policy)
      const state = await loadCluster(context.io, flags.cluster ?? [])
      const result = planRange(policy, state, family, request)
      context.io.stdout(formatPlan(result, flags.output))
      context.exitCode = result.cidr === undefined ? exitCodes.denied : exitCodes.ok
    })
}
