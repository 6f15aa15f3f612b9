import t from 'tap'
import { validateName, validateSpec } from '../../../src/policy/rules/valid-cidrs.ts'

void t.test('validateSpec counts errors as ValidateServiceCIDR does (TestValidateServiceCIDR)', (t) => {
  // kubernetes@v1.37.2/pkg/apis/networking/validation/validation_test.go; then cases of our own.
  const cases: { name: string, cidrs: string[], expectedErrors: number }[] = [
    { name: 'empty-iprange', cidrs: [], expectedErrors: 1 },
    { name: 'three-ipranges', cidrs: ['192.168.0.0/24', 'fd00::/64', '10.0.0.0/16'], expectedErrors: 1 },
    { name: 'good-iprange-ipv4', cidrs: ['192.168.0.0/24'], expectedErrors: 0 },
    { name: 'good-iprange-ipv6', cidrs: ['fd00:1234::/64'], expectedErrors: 0 },
    { name: 'good-iprange-ipv4-ipv6', cidrs: ['192.168.0.0/24', 'fd00:1234::/64'], expectedErrors: 0 },
    { name: 'not-iprange-ipv4', cidrs: ['asdasdasd'], expectedErrors: 1 },
    { name: 'iponly-iprange-ipv4', cidrs: ['192.168.0.1'], expectedErrors: 1 },
    { name: 'badip-iprange-ipv4', cidrs: ['192.168.0.1/24'], expectedErrors: 1 },
    { name: 'badip-iprange-ipv6', cidrs: ['fd00:1234::2/64'], expectedErrors: 1 },
    { name: 'badip-iprange-caps-ipv6', cidrs: ['FD00:1234::0/64'], expectedErrors: 1 },
    { name: 'good-iprange-ipv4-bad-ipv6', cidrs: ['192.168.0.0/24', 'FD00:1234::/64'], expectedErrors: 1 },
    { name: 'good-iprange-ipv6-bad-ipv4', cidrs: ['192.168.007.0/24', 'fd00:1234::/64'], expectedErrors: 1 },
    { name: 'bad-iprange-ipv6-bad-ipv4', cidrs: ['192.168.007.0/24', 'MN00:1234::/64'], expectedErrors: 2 },

    { name: 'two IPv4', cidrs: ['10.0.0.0/24', '10.1.0.0/16'], expectedErrors: 1 },
    { name: 'two IPv6', cidrs: ['fd00::/64', 'fd01::/64'], expectedErrors: 1 },
    { name: 'the same CIDR twice', cidrs: ['10.0.0.0/24', '10.0.0.0/24'], expectedErrors: 1 },
    // The family check reads invalid CIDRs too (IPFamilyOfCIDRString uses ParseCIDRSloppy).
    { name: 'two IPv4, one with host bits', cidrs: ['10.0.0.1/24', '10.1.0.0/16'], expectedErrors: 2 },
    { name: 'two IPv4, both with leading zeros', cidrs: ['010.0.0.0/24', '10.01.0.0/16'], expectedErrors: 3 },
    { name: 'IPv4 and IPv4-mapped IPv6 (To4 makes it IPv4)', cidrs: ['10.0.0.0/24', '::ffff:10.0.0.0/120'], expectedErrors: 2 },
    { name: 'two that are not CIDRs: no family to compare', cidrs: ['asd', 'qwe'], expectedErrors: 2 },
    { name: 'four CIDRs: one error, whatever they hold', cidrs: ['a', 'b', 'c', 'd'], expectedErrors: 1 },
  ]
  for (const tc of cases) t.equal(validateSpec(tc.cidrs).violations.length, tc.expectedErrors, tc.name)
  t.end()
})

void t.test('validateSpec writes errors as field.ErrorList does, and keeps the CIDRs that parsed', (t) => {
  const sameFamily = 'spec.cidrs: Invalid value: may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64'
  const cases: { name: string, cidrs: string[], violations: [string, string][], parsed: [string, string][] }[] = [
    { name: 'dual-stack', cidrs: ['10.96.0.0/12', 'fd00::/108'], violations: [], parsed: [['spec.cidrs[0]', '10.96.0.0/12'], ['spec.cidrs[1]', 'fd00::/108']] },
    { name: 'empty', cidrs: [], violations: [['spec.cidrs', 'spec.cidrs: Required value: at least one CIDR required']], parsed: [] },
    { name: 'three', cidrs: ['10.0.0.0/8', 'fd00::/8', '11.0.0.0/8'], violations: [['spec.cidrs', 'spec.cidrs: Invalid value: may only hold up to 2 values']], parsed: [] },
    {
      name: 'second invalid',
      cidrs: ['10.96.0.0/12', 'FD00::/108'],
      violations: [['spec.cidrs[1]', 'spec.cidrs[1]: Invalid value: "FD00::/108": must be in canonical form ("fd00::/108")']],
      parsed: [['spec.cidrs[0]', '10.96.0.0/12']],
    },
    {
      name: 'same family, one invalid',
      cidrs: ['10.0.0.1/24', '10.1.0.0/16'],
      violations: [
        ['spec.cidrs[0]', 'spec.cidrs[0]: Invalid value: "10.0.0.1/24": must not have bits set beyond the prefix length'],
        ['spec.cidrs', sameFamily],
      ],
      parsed: [['spec.cidrs[1]', '10.1.0.0/16']],
    },
  ]
  for (const tc of cases) {
    const spec = validateSpec(tc.cidrs)
    t.same(spec.violations.map((violation) => [violation.field, violation.message]), tc.violations, `${tc.name}: violations`)
    t.ok(spec.violations.every((violation) => violation.rule === 'ValidCIDR'), `${tc.name}: rule`)
    t.same(spec.parsed.map(({ field, prefix }) => [field, prefix.text]), tc.parsed, `${tc.name}: parsed`)
  }
  t.end()
})

void t.test('validateName: ValidateServiceCIDRName is NameIsDNSSubdomain (IsDNS1123Subdomain), with its messages', (t) => {
  const subdomain = 'a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \'-\' or \'.\', and must start and end with an alphanumeric character (e.g. \'example.com\', regex used for validation is \'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\')'
  const cases: [string, string[]][] = [
    ['kubernetes', []],
    ['extra-range.team-a', []],
    ['0', []],
    ['a'.repeat(253), []],
    ['', ['metadata.name: Required value: name or generateName is required']],
    ['Team_B', [`metadata.name: Invalid value: "Team_B": ${subdomain}`]],
    ['-a', [`metadata.name: Invalid value: "-a": ${subdomain}`]],
    ['a.', [`metadata.name: Invalid value: "a.": ${subdomain}`]],
    ['a..b', [`metadata.name: Invalid value: "a..b": ${subdomain}`]],
    ['a'.repeat(254), [`metadata.name: Invalid value: "${'a'.repeat(254)}": must be no more than 253 characters`]],
    [`${'a'.repeat(253)}-`, [`metadata.name: Invalid value: "${'a'.repeat(253)}-": must be no more than 253 characters`, `metadata.name: Invalid value: "${'a'.repeat(253)}-": ${subdomain}`]],
  ]
  for (const [name, messages] of cases) {
    const violations = validateName(name)
    t.same(violations.map((violation) => violation.message), messages, JSON.stringify(name.slice(0, 20)))
    t.ok(violations.every((violation) => violation.rule === 'ValidName' && violation.field === 'metadata.name'))
  }
  t.end()
})
