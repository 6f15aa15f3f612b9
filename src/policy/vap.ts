// The stateless part of a policy as a ValidatingAdmissionPolicy and its binding
// (admissionregistration.k8s.io/v1), so that kube-apiserver enforces it in-process, even while the
// webhook is down. Pure: a policy in, two objects out.
//
// What CEL can enforce: allowedRanges, deniedRanges and prefixLength on the CIDRs a CREATE or UPDATE
// brings in, protectedNames on DELETE, exemptions, and enforcement. What it cannot: overlap and
// deletion.requireUnused read the other ServiceCIDRs and the IPAddresses, and capacity counts them;
// only the webhook sees those.
//
// Each message is the engine's, word for word (src/policy/rules/), so a denial reads the same from
// either; only the engine's suggestion of a free range is missing, since it needs the cluster's state.
// The e2e suite (test/e2e/10-vap.test.ts) holds the two to the same verdicts and messages.

import { familyWidth, type Family, type Prefix } from './ip.ts'
import { apiserverUsername, defaultServiceCIDRName, type Policy } from './types.ts'

/** A Kubernetes minor version, 1.x. */
export interface KubernetesVersion {
  readonly major: 1
  readonly minor: number
}

/** What an apiserver needs to serve for a generated policy to work, and since which version. */
interface Requirement {
  readonly since: number
  readonly what: string
}

const validatingAdmissionPolicyV1: Requirement = {
  since: 30,
  what: 'ValidatingAdmissionPolicy is served as admissionregistration.k8s.io/v1 from Kubernetes 1.30',
}
const serviceCIDRs: Requirement = {
  since: 31,
  what: 'ServiceCIDRs are served from Kubernetes 1.31 (networking.k8s.io/v1beta1, behind the MultiCIDRServiceAllocator feature gate until 1.33, which serves v1)',
}
// k8s.io/apiserver/pkg/cel/environment/base.go adds library.IP and library.CIDR with
// IntroducedVersion 1.30. A new expression is compiled in the environment of the apiserver's CEL
// compatibility version, which is one minor behind (DefaultCompatibilityVersion; kubernetes#124779
// made it 1.30 in 1.31), so a 1.30 apiserver refuses new expressions that call cidr() or ip().
const cidrLibrary: Requirement = {
  since: 31,
  what: 'allowedRanges, deniedRanges and prefixLength need the CEL functions cidr() and ip() (k8s.io/apiserver/pkg/cel/library), which new expressions may use from Kubernetes 1.31',
}

/** The oldest Kubernetes a generated policy can target: every policy needs ServiceCIDRs. */
export const oldestTarget: KubernetesVersion = { major: 1, minor: serviceCIDRs.since }

/** A policy that cannot be written as a ValidatingAdmissionPolicy for the target. */
export class NotExpressibleError extends Error {
  readonly problems: readonly string[]
  constructor(summary: string, problems: readonly string[]) {
    super(`${summary}:\n${problems.map((problem) => `  - ${problem}`).join('\n')}`)
    this.name = 'NotExpressibleError'
    this.problems = problems
  }
}

const hasBounds = (policy: Policy, family: Family): boolean => {
  const bounds = policy.prefixLength[family]
  return bounds !== undefined && (bounds.min > 0 || bounds.max < familyWidth(family))
}

const familiesBounded = (policy: Policy): Family[] => (['IPv4', 'IPv6'] as const).filter((family) => hasBounds(policy, family))

/** Whether the policy has a rule on the CIDRs a CREATE or UPDATE brings in that CEL can check. */
const checksCIDRs = (policy: Policy): boolean =>
  policy.allowedRanges !== undefined || policy.deniedRanges.length > 0 || familiesBounded(policy).length > 0

/** A CEL string literal. */
function cel(text: string): string {
  // Printable ASCII in single quotes; anything else as a JSON string, which is a valid CEL literal.
  return /^[\x20-\x7e]*$/.test(text) ? `'${text.replace(/[\\']/g, '\\$&')}'` : JSON.stringify(text)
}

const celList = (texts: readonly string[]): string => `[${texts.map(cel).join(', ')}]`

// Expressions over one CIDR the request brings in: `variables.cidrs[i]`, whose field is spec.cidrs[i].
// They are written over several lines, which CEL reads as spaces, for the people who read them.
const theCIDR = 'variables.cidrs[i]'
const parsedCIDR = `cidr(${theCIDR})`
/** The start of every message about a CIDR, as the rules write it: "spec.cidrs[0] 10.0.0.0/24". */
const subject = `'spec.cidrs[' + string(i) + '] ' + ${theCIDR}`

/** Maps each added CIDR to a message or '', and keeps the messages: the engine's order, CIDR by CIDR. */
const perCIDR = (lines: readonly string[]): string => ['variables.added.map(i,', ...lines.map((line) => `  ${line}`), `).filter(m, m != '')`].join('\n')

/** Mirrors src/policy/rules/allowed-ranges.ts. */
function allowedRangesViolations(allowed: readonly Prefix[]): string {
  const where = (family: Family): string => {
    const ranges = allowed.filter((range) => range.family === family).map((range) => range.text)
    return cel(ranges.length > 0
      ? ` is outside the allowed ${family} ranges (${ranges.join(', ')})`
      : ` is an ${family} range, and the policy allows no ${family} ranges`)
  }
  const inside = allowed.length === 0 ? 'false' : `${celList(allowed.map((range) => range.text))}.exists(r, cidr(r).containsCIDR(${theCIDR}))`
  return perCIDR([
    `${inside} ? '' :`,
    `${subject} + (${parsedCIDR}.ip().family() == 4`,
    `  ? ${where('IPv4')}`,
    `  : ${where('IPv6')})`,
  ])
}

/**
 * Mirrors src/policy/rules/denied-ranges.ts: for each CIDR in spec.cidrs, the denied ranges it
 * overlaps (two CIDRs overlap when one contains the other).
 */
function deniedRangesHits(denied: readonly Prefix[]): string {
  return `[0, 1].filter(i, i < size(variables.cidrs)).map(i,\n  ${celList(denied.map((range) => range.text))}.filter(d, cidr(d).containsCIDR(${theCIDR}) || ${parsedCIDR}.containsCIDR(d)))`
}

function deniedRangesViolations(): string {
  const hits = 'variables.deniedRangesHit[i]'
  return perCIDR([
    `size(${hits}) == 0 ? '' :`,
    `${subject} + ' overlaps the denied range' + (size(${hits}) > 1 ? 's ' : ' ') + ${hits}.join(', ')`,
  ])
}

/** Mirrors src/policy/rules/prefix-length.ts. */
function prefixLengthViolations(policy: Policy): string {
  const check = (family: Family): string[] => {
    const bounds = policy.prefixLength[family]
    if (bounds === undefined || !hasBounds(policy, family)) return [`''`]
    const allows = `: the policy allows ${family} prefixes from /${bounds.min} to /${bounds.max}`
    return [
      `${parsedCIDR}.prefixLength() < ${bounds.min} ? ${subject} + ${cel(` is too large${allows}`)} :`,
      `${parsedCIDR}.prefixLength() > ${bounds.max} ? ${subject} + ${cel(` is too small${allows}`)} : ''`,
    ]
  }
  const [four, six] = [check('IPv4'), check('IPv6')]
  return perCIDR([
    `${parsedCIDR}.ip().family() == 4 ? (`,
    ...four.map((line) => `  ${line}`),
    ') : (',
    ...six.map((line) => `  ${line}`),
    ')',
  ])
}

/** Mirrors src/policy/rules/protected-names.ts. */
function protectedNameViolations(names: readonly string[]): string {
  const message = `'ServiceCIDR "' + request.name + '" is protected by the policy (spec.protectedNames) and may not be deleted; ask the platform team to change the policy if it really must go'`
  return `request.operation == 'DELETE' && request.name in ${celList(names)}\n  ? [${message}]\n  : []`
}

interface Variable {
  readonly name: string
  readonly expression: string
}

export interface GeneratedPolicy {
  /** The ValidatingAdmissionPolicy and its ValidatingAdmissionPolicyBinding. */
  readonly objects: readonly [Record<string, unknown>, Record<string, unknown>]
  /** What the policy holds that only the webhook can enforce, for the reader of the output. */
  readonly leftToWebhook: readonly string[]
}

export const generatedName = 'servicecidr-guard'

/**
 * The policy's stateless rules as a ValidatingAdmissionPolicy and binding for apiservers of version
 * `target` and later. Throws NotExpressibleError when the target lacks what they need, or when the
 * policy has no stateless rule at all.
 */
export function generateAdmissionPolicy(policy: Policy, target: KubernetesVersion): GeneratedPolicy {
  const onCIDRs = checksCIDRs(policy)
  const onDelete = policy.protectedNames.length > 0
  if (!onCIDRs && !onDelete) {
    throw new NotExpressibleError('the policy has no rule a ValidatingAdmissionPolicy can enforce', [
      'CEL can check allowedRanges, deniedRanges, prefixLength and protectedNames, and this policy sets none of them',
      'overlap and deletion.requireUnused read the cluster\'s other ServiceCIDRs and IPAddresses: only the webhook can enforce them',
    ])
  }
  const needs = [validatingAdmissionPolicyV1, serviceCIDRs, ...(onCIDRs ? [cidrLibrary] : [])]
  const missing = needs.filter((requirement) => target.minor < requirement.since).map((requirement) => requirement.what)
  if (missing.length > 0) {
    throw new NotExpressibleError(`Kubernetes ${target.major}.${target.minor} cannot enforce this policy as a ValidatingAdmissionPolicy`, missing)
  }

  const rules: Variable[] = []
  if (policy.allowedRanges !== undefined) rules.push({ name: 'allowedRanges', expression: allowedRangesViolations(policy.allowedRanges) })
  if (policy.deniedRanges.length > 0) rules.push({ name: 'deniedRanges', expression: deniedRangesViolations() })
  if (familiesBounded(policy).length > 0) rules.push({ name: 'prefixLength', expression: prefixLengthViolations(policy) })
  if (onDelete) rules.push({ name: 'protectedNames', expression: protectedNameViolations(policy.protectedNames) })
  const variables: Variable[] = [
    ...(onCIDRs
      ? [
          { name: 'cidrs', expression: `request.operation == 'DELETE' ? [] : object.spec.cidrs` },
          // The places in spec.cidrs (at most 2, validateServiceCIDRSpec) of the CIDRs the request brings
          // in: every one on CREATE; on UPDATE those the old object lacks, as the engine checks only what
          // is added (CIDRs are immutable except that a single-CIDR ServiceCIDR may gain the other family).
          { name: 'added', expression: `[0, 1].filter(i, i < size(variables.cidrs) &&\n  (request.operation != 'UPDATE' || !(variables.cidrs[i] in oldObject.spec.cidrs)))` },
        ]
      : []),
    ...(policy.deniedRanges.length > 0 ? [{ name: 'deniedRangesHit', expression: deniedRangesHits(policy.deniedRanges) }] : []),
    ...rules,
    { name: 'violations', expression: rules.map((rule) => `variables.${rule.name}`).join(' + ') },
  ]

  const { usernames, groups } = policy.exemptions
  const matchConditions = [
    // As the webhook's registration (config/webhook/manifests.yaml) and the engine: kube-apiserver's own
    // default ServiceCIDR, which it creates and re-syncs itself, is never refused.
    { name: 'skip-apiserver-default-servicecidr', expression: `!(request.userInfo.username == ${cel(apiserverUsername)} && request.name == ${cel(defaultServiceCIDRName)})` },
    // Metadata-only UPDATEs (kube-controller-manager's finalizer patches) bring in no CIDR.
    { name: 'skip-metadata-only-updates', expression: `request.operation != 'UPDATE' || object.spec != oldObject.spec` },
    ...(usernames.length > 0 ? [{ name: 'skip-exempt-users', expression: `!(request.userInfo.username in ${celList(usernames)})` }] : []),
    ...(groups.length > 0 ? [{ name: 'skip-exempt-groups', expression: `!has(request.userInfo.groups) || !request.userInfo.groups.exists(g, g in ${celList(groups)})` }] : []),
  ]

  const labels = { 'app.kubernetes.io/name': 'servicecidr-guard', 'app.kubernetes.io/component': 'admission-policy' }
  const admissionPolicy = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicy',
    metadata: { name: generatedName, labels },
    spec: {
      // A CEL error (none is expected: the apiserver validates spec.cidrs before admission) refuses.
      failurePolicy: 'Fail',
      matchConstraints: {
        // A request in any version of servicecidrs reaches the policy, converted if need be; v1beta1
        // (1.31-1.36) and v1 arrive as they were made, with the same spec.
        matchPolicy: 'Equivalent',
        resourceRules: [{
          apiGroups: ['networking.k8s.io'],
          apiVersions: ['v1', 'v1beta1'],
          operations: [...(onCIDRs ? ['CREATE', 'UPDATE'] : []), ...(onDelete ? ['DELETE'] : [])],
          resources: ['servicecidrs'],
          scope: 'Cluster',
        }],
      },
      matchConditions,
      variables,
      validations: [{
        expression: 'size(variables.violations) == 0',
        // The engine's denial: "<subject> is not allowed by the servicecidr-guard policy: <reasons>."
        messageExpression:
          `(request.operation == 'DELETE' ? 'Deleting ServiceCIDR "' : 'ServiceCIDR "') + request.name +\n` +
          `'" is not allowed by the servicecidr-guard policy: ' + variables.violations.join('; ') + '.'`,
        message: 'the ServiceCIDR is not allowed by the servicecidr-guard policy',
        // 403, as the webhook's denials; without a reason the apiserver answers 422 Invalid.
        reason: 'Forbidden',
      }],
    },
  }
  const binding = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicyBinding',
    metadata: { name: generatedName, labels },
    spec: {
      policyName: generatedName,
      // spec.enforcement: Deny refuses, Warn allows with a warning to the client, Audit allows and
      // records the failure in the audit log (validation.policy.admission.k8s.io/validation_failure).
      validationActions: [policy.enforcement],
    },
  }
  const leftToWebhook = [
    ...(policy.overlap === 'Allow' ? [] : [`overlap: ${policy.overlap}`]),
    ...(policy.deletion.requireUnused ? ['deletion.requireUnused'] : []),
    ...(Object.keys(policy.capacity.warnWhenFreeBelow).length > 0 ? ['capacity.warnWhenFreeBelow'] : []),
  ]
  return { objects: [admissionPolicy, binding], leftToWebhook }
}

/** Reads "1.31", "v1.31" or "v1.31.4"; undefined for anything else. */
export function parseKubernetesVersion(text: string): KubernetesVersion | undefined {
  const match = /^v?1\.(\d{1,3})(?:\.\d+)?$/.exec(text)
  return match?.[1] === undefined ? undefined : { major: 1, minor: Number(match[1]) }
}
