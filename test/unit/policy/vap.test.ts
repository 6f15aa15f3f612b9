// The policy as a ValidatingAdmissionPolicy (src/policy/vap.ts): what it matches, which rules it
// carries, how enforcement maps to validationActions, and the targets it refuses. What the CEL
// decides is proven against a real kube-apiserver (test/e2e/10-vap.test.ts): no CEL evaluator with
// Kubernetes' cidr() library exists outside it.

import t from 'tap'
import { generateAdmissionPolicy, NotExpressibleError, oldestTarget, parseKubernetesVersion } from '../../../src/policy/vap.ts'
import { policy } from '../../support/fixtures.ts'

interface Spec {
  matchConstraints: { matchPolicy: string, resourceRules: { apiVersions: string[], operations: string[], resources: string[] }[] }
  matchConditions: { name: string, expression: string }[]
  variables: { name: string, expression: string }[]
  validations: { expression: string, messageExpression: string, reason: string }[]
  failurePolicy: string
}

function generated(fixture: Parameters<typeof policy>[0], minor = 31): { spec: Spec, binding: { policyName: string, validationActions: string[] }, left: readonly string[] } {
  const { objects: [admissionPolicy, binding], leftToWebhook } = generateAdmissionPolicy(policy(fixture), { major: 1, minor })
  return { spec: admissionPolicy['spec'] as Spec, binding: binding['spec'] as { policyName: string, validationActions: string[] }, left: leftToWebhook }
}

const variable = (spec: Spec, name: string): string | undefined => spec.variables.find((entry) => entry.name === name)?.expression

t.test('matches servicecidrs in v1 and v1beta1, fails closed, and refuses with 403', (t) => {
  const { spec, binding } = generated({ allowedRanges: ['10.96.0.0/12'] })
  t.equal(spec.failurePolicy, 'Fail')
  t.equal(spec.matchConstraints.matchPolicy, 'Equivalent')
  t.strictSame(spec.matchConstraints.resourceRules.map(({ apiVersions, operations, resources }) => ({ apiVersions, operations, resources })), [
    { apiVersions: ['v1', 'v1beta1'], operations: ['CREATE', 'UPDATE'], resources: ['servicecidrs'] },
  ], 'CREATE and UPDATE only: no rule on DELETE without protectedNames')
  t.equal(spec.validations.length, 1, 'one validation: every violation in one message, as the webhook writes it')
  t.equal(spec.validations[0]?.reason, 'Forbidden', '403, as the webhook (the apiserver answers 422 without a reason)')
  t.match(spec.validations[0]?.messageExpression, /is not allowed by the servicecidr-guard policy: ' \+ variables\.violations\.join\('; '\) \+ '\.'$/)
  t.equal(binding.policyName, 'servicecidr-guard')
  t.end()
})

t.test('kube-apiserver\'s own ServiceCIDR and metadata-only updates are never checked, as by the webhook', (t) => {
  const { spec } = generated({ deniedRanges: ['10.0.0.0/8'] })
  t.strictSame(spec.matchConditions, [
    { name: 'skip-apiserver-default-servicecidr', expression: "!(request.userInfo.username == 'system:apiserver' && request.name == 'kubernetes')" },
    { name: 'skip-metadata-only-updates', expression: "request.operation != 'UPDATE' || object.spec != oldObject.spec" },
  ])
  t.end()
})

t.test('exemptions become matchConditions, with CEL string literals escaped', (t) => {
  const { spec } = generated({ allowedRanges: [], exemptions: { usernames: ['system:serviceaccount:ops:bot', "o'brien"], groups: ['platform-admins', 'gruppe-ä'] } })
  t.strictSame(spec.matchConditions.slice(2), [
    { name: 'skip-exempt-users', expression: "!(request.userInfo.username in ['system:serviceaccount:ops:bot', 'o\\'brien'])" },
    { name: 'skip-exempt-groups', expression: '!has(request.userInfo.groups) || !request.userInfo.groups.exists(g, g in [\'platform-admins\', "gruppe-ä"])' },
  ])
  t.end()
})

t.test('one variable a rule, only for the rules the policy sets, summed in the engine\'s order', (t) => {
  const cases: [string, Parameters<typeof policy>[0], string[]][] = [
    ['allowedRanges', { allowedRanges: ['10.0.0.0/8'] }, ['cidrs', 'added', 'allowedRanges', 'violations']],
    ['an empty allowedRanges allows nowhere', { allowedRanges: [] }, ['cidrs', 'added', 'allowedRanges', 'violations']],
    ['deniedRanges', { deniedRanges: ['10.0.0.0/8'] }, ['cidrs', 'added', 'deniedRangesHit', 'deniedRanges', 'violations']],
    ['prefixLength', { prefixLength: { IPv6: { min: 64, max: 128 } } }, ['cidrs', 'added', 'prefixLength', 'violations']],
    ['protectedNames alone', { protectedNames: ['kubernetes'] }, ['protectedNames', 'violations']],
    ['everything', { allowedRanges: ['10.0.0.0/8'], deniedRanges: ['10.1.0.0/16'], prefixLength: { IPv4: { min: 16, max: 28 } }, protectedNames: ['a'] },
      ['cidrs', 'added', 'deniedRangesHit', 'allowedRanges', 'deniedRanges', 'prefixLength', 'protectedNames', 'violations']],
  ]
  for (const [name, fixture, variables] of cases) {
    const { spec } = generated(fixture)
    t.strictSame(spec.variables.map((entry) => entry.name), variables, name)
    t.equal(variable(spec, 'violations'), variables.filter((entry) => !['cidrs', 'added', 'deniedRangesHit', 'violations'].includes(entry)).map((entry) => `variables.${entry}`).join(' + '), `${name}: violations in the engine's order`)
  }
  t.end()
})

t.test('rules carry the engine\'s words', (t) => {
  const { spec } = generated({ allowedRanges: ['10.0.0.0/8', 'fd00::/8'], deniedRanges: ['10.1.0.0/16'], prefixLength: { IPv4: { min: 16, max: 28 } }, protectedNames: ['core'] })
  t.match(variable(spec, 'allowedRanges'), "? ' is outside the allowed IPv4 ranges (10.0.0.0/8)'")
  t.match(variable(spec, 'allowedRanges'), ": ' is outside the allowed IPv6 ranges (fd00::/8)'")
  t.match(variable(spec, 'deniedRanges'), "' overlaps the denied range' + (size(variables.deniedRangesHit[i]) > 1 ? 's ' : ' ')")
  t.match(variable(spec, 'prefixLength'), "cidr(variables.cidrs[i]).prefixLength() < 16 ? 'spec.cidrs[' + string(i) + '] ' + variables.cidrs[i] + ' is too large: the policy allows IPv4 prefixes from /16 to /28'")
  t.match(variable(spec, 'prefixLength'), "cidr(variables.cidrs[i]).prefixLength() > 28 ? 'spec.cidrs[' + string(i) + '] ' + variables.cidrs[i] + ' is too small: the policy allows IPv4 prefixes from /16 to /28'")
  t.match(variable(spec, 'protectedNames'), "request.operation == 'DELETE' && request.name in ['core']")
  t.match(variable(spec, 'protectedNames'), 'is protected by the policy (spec.protectedNames) and may not be deleted')
  const noIPv6 = generated({ allowedRanges: ['10.0.0.0/8'] }).spec
  t.match(variable(noIPv6, 'allowedRanges'), ": ' is an IPv6 range, and the policy allows no IPv6 ranges'", 'a family with no allowed range')
  t.match(variable(generated({ allowedRanges: [] }).spec, 'allowedRanges'), "false ? '' :", 'allowedRanges: [] admits nothing')
  t.end()
})

t.test('bounds that bound nothing are left out; DELETE is matched only for protectedNames', (t) => {
  t.throws(() => generated({ prefixLength: { IPv4: { min: 0, max: 32 } } }), NotExpressibleError, '/0 to /32 bounds nothing: nothing to enforce')
  const { spec } = generated({ protectedNames: ['kubernetes'] })
  t.strictSame(spec.matchConstraints.resourceRules[0]?.operations, ['DELETE'])
  t.strictSame(generated({ protectedNames: ['a'], deniedRanges: ['10.0.0.0/8'] }).spec.matchConstraints.resourceRules[0]?.operations, ['CREATE', 'UPDATE', 'DELETE'])
  t.end()
})

t.test('enforcement is the binding\'s validationActions', (t) => {
  for (const enforcement of ['Deny', 'Warn', 'Audit'] as const) {
    t.strictSame(generated({ allowedRanges: ['10.0.0.0/8'], enforcement }).binding.validationActions, [enforcement], enforcement)
  }
  t.end()
})

t.test('what only the webhook can enforce is named', (t) => {
  t.strictSame(generated({ allowedRanges: ['10.0.0.0/8'] }).left, ['overlap: Deny', 'deletion.requireUnused'])
  t.strictSame(generated({ allowedRanges: ['10.0.0.0/8'], overlap: 'Allow', requireUnused: false, capacity: { warnWhenFreeBelow: { IPv4: 8 } } }).left, ['capacity.warnWhenFreeBelow'])
  t.end()
})

t.test('a target that cannot express the policy is refused, naming what it lacks', (t) => {
  const problems = (fixture: Parameters<typeof policy>[0], minor: number): readonly string[] => {
    try {
      generated(fixture, minor)
    } catch (error) {
      if (error instanceof NotExpressibleError) return error.problems
      throw error
    }
    return []
  }
  t.equal(oldestTarget.minor, 31, 'the oldest target: ServiceCIDRs and cidr() in new expressions')
  t.strictSame(problems({ allowedRanges: ['10.0.0.0/8'] }, 31), [], '1.31 expresses every rule')
  t.strictSame(problems({ allowedRanges: ['10.0.0.0/8'] }, 30), [
    'ServiceCIDRs are served from Kubernetes 1.31 (networking.k8s.io/v1beta1, behind the MultiCIDRServiceAllocator feature gate until 1.33, which serves v1)',
    'allowedRanges, deniedRanges and prefixLength need the CEL functions cidr() and ip() (k8s.io/apiserver/pkg/cel/library), which new expressions may use from Kubernetes 1.31',
  ], '1.30: no ServiceCIDRs, and cidr() only in stored expressions')
  t.strictSame(problems({ protectedNames: ['kubernetes'] }, 30), [
    'ServiceCIDRs are served from Kubernetes 1.31 (networking.k8s.io/v1beta1, behind the MultiCIDRServiceAllocator feature gate until 1.33, which serves v1)',
  ], 'protectedNames alone needs no cidr()')
  t.equal(problems({ deniedRanges: ['10.0.0.0/8'] }, 29)[0], 'ValidatingAdmissionPolicy is served as admissionregistration.k8s.io/v1 from Kubernetes 1.30', '1.29: no v1 ValidatingAdmissionPolicy')
  t.match(problems({}, 33), ['CEL can check allowedRanges, deniedRanges, prefixLength and protectedNames, and this policy sets none of them'], 'a policy with no stateless rule')
  t.end()
})

t.test('Kubernetes versions are read as 1.x', (t) => {
  t.strictSame(parseKubernetesVersion('1.33'), { major: 1, minor: 33 })
  t.strictSame(parseKubernetesVersion('v1.34.4'), { major: 1, minor: 34 })
  for (const bad of ['2.0', '1', '1.x', 'v1.31.4-beta', '']) t.equal(parseKubernetesVersion(bad), undefined, JSON.stringify(bad))
  t.end()
})
