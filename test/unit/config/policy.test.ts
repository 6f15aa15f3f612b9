import t from 'tap'
import { parsePolicy, policyFromObject, PolicyError } from '../../../src/config/policy.ts'
import type { Policy } from '../../../src/policy/types.ts'
import { policy } from '../../support/fixtures.ts'

const header = 'apiVersion: servicecidr-guard/v1alpha1\nkind: Policy\n'

/** The problems parsePolicy reports, or the policy if there are none. */
function problemsOf(text: string): readonly string[] | Policy {
  try {
    return parsePolicy(text, 'policy.yaml')
  } catch (error) {
    if (error instanceof PolicyError) return error.problems
    throw error
  }
}

void t.test('valid policies', (t) => {
  const cases: { name: string, text: string, want: Policy }[] = [
    {
      name: 'the smallest policy: every default',
      text: `${header}spec: {}\n`,
      want: policy(),
    },
    {
      name: 'every field, in YAML',
      text: `${header}metadata:
  name: production
spec:
  allowedRanges: [10.96.0.0/12, "fd00:10::/32"]
  deniedRanges:
    - 10.104.0.0/16
    - fd00:10:104::/48
  overlap: AllowExpansion
  prefixLength:
    ipv4: { min: 16, max: 28 }
    ipv6: { min: 64, max: 120 }
  deletion:
    requireUnused: false
  protectedNames: [kubernetes]
  exemptions:
    usernames: [system:serviceaccount:platform:cidr-bot]
    groups: [platform-admins]
  enforcement: Warn
  capacity:
    warnWhenFreeBelow: { ipv4: 16, ipv6: 1024 }
`,
      want: policy({
        capacity: { warnWhenFreeBelow: { IPv4: 16, IPv6: 1024 } },
        allowedRanges: ['10.96.0.0/12', 'fd00:10::/32'],
        deniedRanges: ['10.104.0.0/16', 'fd00:10:104::/48'],
        overlap: 'AllowExpansion',
        prefixLength: { IPv4: { min: 16, max: 28 }, IPv6: { min: 64, max: 120 } },
        requireUnused: false,
        protectedNames: ['kubernetes'],
        exemptions: { usernames: ['system:serviceaccount:platform:cidr-bot'], groups: ['platform-admins'] },
        enforcement: 'Warn',
      }),
    },
    {
      name: 'JSON',
      text: '{"apiVersion": "servicecidr-guard/v1alpha1", "kind": "Policy", "spec": {"allowedRanges": ["10.96.0.0/12"], "overlap": "Allow", "enforcement": "Audit"}}',
      want: policy({ allowedRanges: ['10.96.0.0/12'], overlap: 'Allow', enforcement: 'Audit' }),
    },
    {
      name: 'an empty allowedRanges allows nowhere, which is not the same as no allowedRanges',
      text: `${header}spec:\n  allowedRanges: []\n`,
      want: policy({ allowedRanges: [] }),
    },
    {
      name: 'bounds default to 0 and the address width',
      text: `${header}spec:\n  prefixLength:\n    ipv4: { min: 20 }\n    ipv6: { max: 112 }\n`,
      want: policy({ prefixLength: { IPv4: { min: 20, max: 32 }, IPv6: { min: 0, max: 112 } } }),
    },
    {
      name: 'empty bounds still bound the family (to anything)',
      text: `${header}spec:\n  prefixLength:\n    ipv6: {}\n`,
      want: policy({ prefixLength: { IPv6: { min: 0, max: 128 } } }),
    },
    {
      name: 'empty documents around the policy (a trailing ---, as concatenated files end) are skipped',
      text: `---\n---\n${header}spec: {}\n---\n# end\n`,
      want: policy(),
    },
    {
      name: 'min equal to max',
      text: `${header}spec:\n  prefixLength:\n    ipv4: { min: 24, max: 24 }\n`,
      want: policy({ prefixLength: { IPv4: { min: 24, max: 24 } } }),
    },
  ]
  for (const tc of cases) t.same(problemsOf(tc.text), tc.want, tc.name)
  t.end()
})

void t.test('invalid policies: every problem, with its path', (t) => {
  const cases: { name: string, text: string, problems: string[] }[] = [
    {
      name: 'unknown fields, at every level',
      text: `${header}extra: 1\nspec:\n  surprise: true\n  prefixLength: { ipv5: {}, ipv4: { mn: 1 } }\n  deletion: { force: true }\n  exemptions: { users: [] }\n`,
      problems: [
        '(top level): unknown field "extra"',
        'spec: unknown field "surprise"',
        'spec.prefixLength: unknown field "ipv5"',
        'spec.prefixLength.ipv4: unknown field "mn"',
        'spec.deletion: unknown field "force"',
        'spec.exemptions: unknown field "users"',
      ],
    },
    {
      name: 'wrong apiVersion and kind',
      text: 'apiVersion: servicecidr-guard/v1\nkind: Pol\nspec: {}\n',
      problems: ['apiVersion: must be "servicecidr-guard/v1alpha1"', 'kind: must be "Policy"'],
    },
    {
      name: 'missing required fields',
      text: 'kind: Policy\n',
      problems: ['(top level): missing required field "apiVersion"', '(top level): missing required field "spec"'],
    },
    {
      name: 'bad enums',
      text: `${header}spec:\n  overlap: deny\n  enforcement: Block\n`,
      problems: ['spec.overlap: must be one of "Deny", "AllowExpansion", "Allow"', 'spec.enforcement: must be one of "Deny", "Warn", "Audit"'],
    },
    {
      name: 'wrong types',
      text: `${header}metadata: { name: 7 }\nspec:\n  allowedRanges: 10.0.0.0/8\n  deniedRanges: [10.0.0.0/8, 42]\n  deletion: { requireUnused: "yes" }\n  protectedNames: [kubernetes, ""]\n  exemptions: { groups: [true] }\n  prefixLength: { ipv4: { min: 8.5 } }\n`,
      problems: [
        'metadata.name: must be string',
        'spec.allowedRanges: must be array',
        'spec.deniedRanges[1]: must be string',
        'spec.prefixLength.ipv4.min: must be integer',
        'spec.deletion.requireUnused: must be boolean',
        'spec.protectedNames[1]: must NOT have fewer than 1 characters',
        'spec.exemptions.groups[0]: must be string',
      ],
    },
    {
      name: 'bounds outside the address width',
      text: `${header}spec:\n  prefixLength:\n    ipv4: { min: -1, max: 33 }\n    ipv6: { max: 129 }\n`,
      problems: ['spec.prefixLength.ipv4.min: must be >= 0', 'spec.prefixLength.ipv4.max: must be <= 32', 'spec.prefixLength.ipv6.max: must be <= 128'],
    },
    {
      name: 'a spec that is not an object',
      text: `${header}spec: [10.0.0.0/8]\n`,
      problems: ['spec: must be object'],
    },
    {
      name: 'a document that is not an object',
      text: '- apiVersion: servicecidr-guard/v1alpha1\n',
      problems: ['(top level): must be object'],
    },
    {
      name: 'an empty file',
      text: '',
      problems: ['the file holds no policy (it is empty, or only comments); it must hold one servicecidr-guard/v1alpha1 Policy'],
    },
    {
      name: 'a file of comments and empty documents',
      text: '# the policy goes here\n---\n---\n',
      problems: ['the file holds no policy (it is empty, or only comments); it must hold one servicecidr-guard/v1alpha1 Policy'],
    },
    {
      name: 'non-canonical CIDRs, with the reason Kubernetes gives',
      text: `${header}spec:\n  allowedRanges: [10.96.0.0/12, "fd00::/64", 10.0.0.1/24, "FD00::/8"]\n  deniedRanges: [010.0.0.0/8, 10.0.0.0, "::ffff:10.0.0.0/104"]\n`,
      problems: [
        'spec.allowedRanges[2]: "10.0.0.1/24" is not a canonical CIDR (must not have bits set beyond the prefix length)',
        'spec.allowedRanges[3]: "FD00::/8" is not a canonical CIDR (must be in canonical form ("fd00::/8"))',
        'spec.deniedRanges[0]: "010.0.0.0/8" is not a canonical CIDR (must not have leading 0s in IP or prefix length)',
        'spec.deniedRanges[1]: "10.0.0.0" is not a canonical CIDR (must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64))',
        'spec.deniedRanges[2]: "::ffff:10.0.0.0/104" is not a canonical CIDR (must not have an IPv4-mapped IPv6 address)',
      ],
    },
    {
      name: 'min longer than max',
      text: `${header}spec:\n  prefixLength:\n    ipv4: { min: 28, max: 16 }\n    ipv6: { min: 120 }\n`,
      problems: ['spec.prefixLength.ipv4: min /28 is longer than max /16'],
    },
    {
      name: 'min longer than the default max',
      text: `${header}spec:\n  prefixLength:\n    ipv4: { max: 0, min: 1 }\n`,
      problems: ['spec.prefixLength.ipv4: min /1 is longer than max /0'],
    },
    {
      name: 'problems of shape and of meaning, all together',
      text: `${header}spec:\n  overlap: Sometimes\n  allowedRanges: [10.0.0.1/24, 7]\n  deniedRanges: [10.105.0.0/15]\n  prefixLength:\n    ipv4: { min: 30, max: 20 }\n    ipv6: { min: 130, max: 64 }\n`,
      problems: [
        'spec.allowedRanges[1]: must be string',
        'spec.overlap: must be one of "Deny", "AllowExpansion", "Allow"',
        'spec.prefixLength.ipv6.min: must be <= 128',
        'spec.allowedRanges[0]: "10.0.0.1/24" is not a canonical CIDR (must not have bits set beyond the prefix length)',
        'spec.deniedRanges[0]: "10.105.0.0/15" is not a canonical CIDR (must not have bits set beyond the prefix length)',
        'spec.prefixLength.ipv4: min /30 is longer than max /20',
        'spec.prefixLength.ipv6: min /130 is longer than max /64',
      ],
    },
    {
      name: 'a YAML syntax error, with its place (the parser stops at the first)',
      text: `${header}spec:\n  overlap: Deny\n  allowedRanges: [10.0.0.0/8\n`,
      problems: ['deficient indentation at line 6, column 1'],
    },
    {
      name: 'duplicate keys, with the place of the second',
      text: `${header}spec:\n  overlap: Deny\n  overlap: Allow\n`,
      problems: ['duplicated mapping key at line 5, column 3'],
    },
    {
      name: 'duplicate keys in JSON',
      text: '{"apiVersion": "servicecidr-guard/v1alpha1", "kind": "Policy", "kind": "Policy", "spec": {}}',
      problems: ['duplicated mapping key at line 1, column 65'],
    },
    {
      name: 'two YAML documents in one file',
      text: `${header}spec: {}\n---\n${header}spec: {}\n`,
      problems: ['a policy file holds one YAML document; another one starts at line 4'],
    },
    {
      name: 'two YAML documents, the file opening with a marker',
      text: `# policy\n---\n${header}spec: {}\n---\n${header}spec: {}\n`,
      problems: ['a policy file holds one YAML document; another one starts at line 6'],
    },
    {
      name: 'two YAML documents after an empty one: the line is the second policy\'s',
      text: `---\n---\n${header}spec: {}\n---\n${header}spec: {}\n`,
      problems: ['a policy file holds one YAML document; another one starts at line 6'],
    },
  ]
  for (const tc of cases) t.same(problemsOf(tc.text), tc.problems, tc.name)
  t.end()
})

void t.test('PolicyError names the source and lists every problem', (t) => {
  const error = t.throws(() => parsePolicy(`${header}spec:\n  overlap: deny\n  allowedRanges: [10.0.0.1/24]\n`, '/etc/servicecidr-guard/policy.yaml'))
  t.ok(error instanceof PolicyError, 'a PolicyError')
  t.equal((error as Error).name, 'PolicyError', 'its name')
  t.equal((error as Error).message, [
    'invalid policy /etc/servicecidr-guard/policy.yaml:',
    '  - spec.overlap: must be one of "Deny", "AllowExpansion", "Allow"',
    '  - spec.allowedRanges[0]: "10.0.0.1/24" is not a canonical CIDR (must not have bits set beyond the prefix length)',
  ].join('\n'))
  t.end()
})

void t.test('policyFromObject takes an object already parsed', (t) => {
  t.same(policyFromObject({ apiVersion: 'servicecidr-guard/v1alpha1', kind: 'Policy', spec: { protectedNames: ['kubernetes'] } }, 'inline'), policy({ protectedNames: ['kubernetes'] }))
  t.throws(() => policyFromObject(null, 'inline'), new PolicyError('inline', ['(top level): must be object']))
  t.end()
})
