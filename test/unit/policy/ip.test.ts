import t from 'tap'
import {
  allocatableRange,
  allocatableSize,
  containsPrefix,
  familyOfCIDR,
  formatAddress,
  hostsPerNetwork,
  invalidIPAddressName,
  makePrefix,
  mustParseCIDR,
  overlaps,
  parseAddress,
  parseCIDR,
  prefixContainsAddress,
  type Address,
  type Family,
  type Prefix,
} from '../../../src/policy/ip.ts'
import type { ServiceCIDRRecord } from '../../../src/policy/types.ts'
import { prefix, serviceCIDR } from '../../support/fixtures.ts'

const invalid = 'must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)'
const leadingZeros = 'must not have leading 0s in IP or prefix length'
const mapped = 'must not have an IPv4-mapped IPv6 address'
const hostBits = 'must not have bits set beyond the prefix length'
const canonical = (form: string): string => `must be in canonical form ("${form}")`

void t.test('parseCIDR answers as apimachinery IsValidCIDR', (t) => {
  // TestIsValidCIDR in k8s.io/apimachinery@v0.37.2/pkg/util/validation/ip_test.go, with the full
  // message where upstream matches a prefix of it; then cases of our own, each checked against
  // IsValidCIDR itself.
  const cases: { name: string, in: string, err?: string }[] = [
    // GOOD VALUES
    { name: 'ipv4', in: '1.0.0.0/8' },
    { name: 'ipv4, all IPs', in: '0.0.0.0/0' },
    { name: 'ipv4, single IP', in: '1.1.1.1/32' },
    { name: 'ipv6', in: '2001:4860:4860::/48' },
    { name: 'ipv6, all IPs', in: '::/0' },
    { name: 'ipv6, single IP', in: '::1/128' },
    // NON-CANONICAL VALUES
    { name: 'ipv6, extra 0s (non-canonical)', in: '2a00:79e0:2:0::/64', err: canonical('2a00:79e0:2::/64') },
    { name: 'ipv6, capital letters (non-canonical)', in: '2001:DB8::/64', err: canonical('2001:db8::/64') },
    // GOOD WITH LEGACY VALIDATION, BAD WITH STRICT VALIDATION
    { name: 'ipv4 with leading 0s', in: '1.1.01.0/24', err: leadingZeros },
    { name: 'ipv4-in-ipv6 with ipv4-sized prefix', in: '::ffff:1.1.1.0/24', err: mapped },
    { name: 'ipv4-in-ipv6 with ipv6-sized prefix', in: '::ffff:1.1.1.0/120', err: mapped },
    { name: 'ipv4 ifaddr', in: '1.2.3.4/24', err: hostBits },
    { name: 'ipv6 ifaddr', in: '2001:db8::1/64', err: hostBits },
    { name: 'prefix length with leading 0s', in: '192.168.0.0/016', err: leadingZeros },
    // BAD VALUES
    { name: 'empty string', in: '', err: invalid },
    { name: 'junk', in: 'aaaaaaa', err: invalid },
    { name: 'IP address', in: '1.2.3.4', err: invalid },
    { name: 'partial URL', in: '192.168.0.1/healthz', err: invalid },
    { name: 'partial URL 2', in: '192.168.0.1/0/99', err: invalid },
    { name: 'negative prefix length', in: '192.168.0.0/-16', err: invalid },
    { name: 'prefix length with sign', in: '192.168.0.0/+16', err: invalid },

    // Leading zeros: ParseCIDRSloppy reads any number of digits, so these are not "invalid".
    { name: 'ipv4 octet with many leading 0s', in: '1.1.0001.0/24', err: leadingZeros },
    { name: 'ipv4 octet of zeros only', in: '10.00.0.0/16', err: leadingZeros },
    { name: 'prefix length with many leading 0s', in: '192.168.0.0/0016', err: leadingZeros },
    { name: 'prefix length 00', in: '0.0.0.0/00', err: leadingZeros },
    { name: 'ipv6 prefix length with leading 0', in: '::/0128', err: leadingZeros },
    { name: 'ipv6 group of five hex digits', in: '00001::/16', err: leadingZeros },
    { name: 'ipv6 with leading 0s in the embedded ipv4', in: '64:ff9b::010.0.0.0/120', err: leadingZeros },
    { name: 'ipv4-mapped with leading 0s: leading 0s first', in: '::ffff:01.1.1.0/120', err: leadingZeros },
    // IPv4-mapped and IPv4-compatible IPv6.
    { name: 'the whole ipv4-mapped block', in: '::ffff:0:0/96', err: mapped },
    { name: 'ipv4-mapped written in hex', in: '::ffff:101:100/120', err: mapped },
    { name: 'ipv4-compatible (not mapped) ipv6, dotted', in: '::1.2.3.4/128', err: canonical('::102:304/128') },
    { name: 'NAT64 prefix with an embedded ipv4', in: '64:ff9b::1.2.3.0/120', err: canonical('64:ff9b::102:300/120') },
    { name: 'NAT64 prefix', in: '64:ff9b::/96' },
    // Host bits.
    { name: 'ipv4 host bit in the last prefix bit', in: '10.0.0.128/24', err: hostBits },
    { name: 'ipv4 /0 with an address', in: '10.0.0.0/0', err: hostBits },
    { name: 'ipv6 host bits and capital letters: host bits first', in: '2001:DB8::1/64', err: hostBits },
    { name: 'ipv6 odd prefix, no host bits', in: '2001:db8:8000::/33' },
    { name: 'ipv6 odd prefix, host bit', in: '2001:db8:4000::/33', err: hostBits },
    // Non-canonical IPv6.
    { name: 'ipv6 uncompressed', in: '2001:db8:0:0:0:0:0:0/32', err: canonical('2001:db8::/32') },
    { name: 'ipv6 all zeros uncompressed', in: '0:0:0:0:0:0:0:0/0', err: canonical('::/0') },
    { name: 'ipv6 with leading 0s in a group', in: '2001:0db8::/32', err: canonical('2001:db8::/32') },
    { name: 'ipv6 compressing a single zero group', in: '2001:db8::1:1:1:1:0/128', err: canonical('2001:db8:0:1:1:1:1:0/128') },
    { name: 'ipv6 single zero group written out', in: '2001:db8:0:1:1:1:1:0/128' },
    { name: 'ipv6 compressing the shorter of two zero runs', in: '1::1:0:0:0:1/128', err: canonical('1:0:0:1::1/128') },
    { name: 'ipv6 two equal zero runs: the first one is compressed', in: '1:0:0:1:1::1/128', err: canonical('1::1:1:0:0:1/128') },
    { name: 'ipv6 trailing zero group written out', in: '1:2:3:4:5:6:7:0/128' },
    { name: 'ipv6 all ones', in: 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128' },
    // Zones, prefix lengths and other malformed input.
    { name: 'ipv6 with a zone', in: 'fe80::%eth0/64', err: invalid },
    { name: 'ipv6 with an empty zone', in: 'fe80::%/64', err: invalid },
    { name: 'missing prefix length', in: '10.0.0.0/', err: invalid },
    { name: 'missing address', in: '/24', err: invalid },
    { name: 'ipv6 without prefix length', in: '2001:db8::', err: invalid },
    { name: 'ipv4 prefix longer than 32', in: '10.0.0.0/33', err: invalid },
    { name: 'ipv6 prefix longer than 128', in: '::/129', err: invalid },
    { name: 'prefix length too large to read', in: '10.0.0.0/99999999999999999999', err: invalid },
    { name: 'three octets', in: '10.0.0/24', err: invalid },
    { name: 'five octets', in: '10.0.0.0.0/24', err: invalid },
    { name: 'octet above 255', in: '256.0.0.0/8', err: invalid },
    { name: 'octet above 255 with leading 0', in: '0256.0.0.0/8', err: invalid },
    { name: 'hex octet', in: '0x10.0.0.0/8', err: invalid },
    { name: 'space before the slash', in: '10.0.0.0 /8', err: invalid },
    { name: 'space after the prefix length', in: '10.0.0.0/8 ', err: invalid },
    { name: 'leading space', in: ' 10.0.0.0/8', err: invalid },
    { name: 'non-ASCII digit', in: '10.0.0.0/\u0668', err: invalid },
    { name: 'ipv6 group above ffff', in: '10000::/16', err: invalid },
    { name: 'ipv6 two ellipses', in: '1::2::/64', err: invalid },
    { name: 'ipv6 nine groups', in: '1:2:3:4:5:6:7:8:9/128', err: invalid },
    { name: 'ipv6 ellipsis standing for no group', in: '1:2:3:4:5:6:7::8/128', err: invalid },
    { name: 'ipv6 single leading colon', in: ':1::/16', err: invalid },
    { name: 'ipv6 single trailing colon', in: '1::1:/128', err: invalid },
    { name: 'ipv6 triple colon', in: ':::/0', err: invalid },
    { name: 'ipv6 embedded ipv4 in the wrong place', in: '1:2:3:4:5:1.2.3.4/128', err: invalid },
    { name: 'ipv6 embedded ipv4 with no room', in: '1:2:3:4:5:6:7:1.2.3.4/128', err: invalid },
    { name: 'ipv6 embedded ipv4 that is not one', in: '::1.2.3/128', err: invalid },
    { name: 'ipv6 embedded ipv4 with an octet above 255', in: '::ffff:1.2.3.256/128', err: invalid },
    { name: 'ipv4 written after an ellipsis with no room left', in: '1:2:3:4:5:6:7::1.2.3.4/128', err: invalid },
  ]
  // Twice: the second answer comes from parseCIDR's memo, and must be the same.
  for (const round of ['parsed', 'remembered']) {
    for (const tc of cases) {
      const got = parseCIDR(tc.in)
      t.same(got.ok ? undefined : got.error, tc.err, `${tc.name} (${round}): ${JSON.stringify(tc.in)}`)
    }
  }
  t.end()
})

void t.test('parseCIDR remembers what it answered, within bounds', (t) => {
  const first = parseCIDR('10.250.0.0/16')
  t.equal(parseCIDR('10.250.0.0/16'), first, 'a text seen before: the same answer, not parsed again')
  // More distinct texts than the memo holds: it is emptied, and every answer is still right.
  for (let i = 0; i < 5000; i++) {
    const text = `10.${i >> 8}.${i & 255}.0/24`
    const got = parseCIDR(text)
    if (!got.ok || got.value.text !== text || got.value.first !== BigInt(((10 << 24) | ((i >> 8) << 16) | ((i & 255) << 8)) >>> 0)) t.fail(`${text}: ${JSON.stringify(got, (_key, value: unknown) => (typeof value === 'bigint' ? String(value) : value))}`)
  }
  t.not(parseCIDR('10.250.0.0/16'), first, 'emptied when full: parsed again')
  t.same(parseCIDR('10.250.0.0/16'), first, '... to the same prefix')
  // A text longer than any CIDR (a hostile review's) is refused every time, and never kept.
  const long = `10.0.0.0/${'1'.repeat(100_000)}`
  const refused = parseCIDR(long)
  t.same(refused, { ok: false, error: invalid })
  t.not(parseCIDR(long), refused, 'parsed again: not kept')
  t.end()
})

void t.test('parseCIDR returns the prefix it read', (t) => {
  const cases: { in: string, family: Family, bits: number, first: bigint, last: bigint }[] = [
    { in: '10.96.0.0/12', family: 'IPv4', bits: 12, first: 0x0a600000n, last: 0x0a6fffffn },
    { in: '0.0.0.0/0', family: 'IPv4', bits: 0, first: 0n, last: 0xffffffffn },
    { in: '192.168.1.1/32', family: 'IPv4', bits: 32, first: 0xc0a80101n, last: 0xc0a80101n },
    { in: '2001:db8::/64', family: 'IPv6', bits: 64, first: 0x20010db8n << 96n, last: (0x20010db8n << 96n) | ((1n << 64n) - 1n) },
    { in: '::/0', family: 'IPv6', bits: 0, first: 0n, last: (1n << 128n) - 1n },
    { in: '::1/128', family: 'IPv6', bits: 128, first: 1n, last: 1n },
  ]
  for (const tc of cases) {
    t.same(parseCIDR(tc.in), { ok: true, value: { family: tc.family, bits: tc.bits, first: tc.first, last: tc.last, text: tc.in } }, tc.in)
  }
  t.end()
})

void t.test('mustParseCIDR returns the prefix or throws, like netip.MustParsePrefix', (t) => {
  t.same(mustParseCIDR('10.96.0.0/12'), { family: 'IPv4', bits: 12, first: 0x0a600000n, last: 0x0a6fffffn, text: '10.96.0.0/12' })
  t.throws(() => mustParseCIDR('10.96.0.1/12'), { message: '"10.96.0.1/12" must not have bits set beyond the prefix length' })
  t.end()
})

void t.test('parseAddress answers as netip.ParseAddr', (t) => {
  const cases: { in: string, want: Address | undefined }[] = [
    { in: '10.0.0.1', want: { family: 'IPv4', value: 0x0a000001n } },
    { in: '0.0.0.0', want: { family: 'IPv4', value: 0n } },
    { in: '255.255.255.255', want: { family: 'IPv4', value: 0xffffffffn } },
    // Names used by TestController_canDeleteCIDR: netip accepts leading zeros in IPv6 groups.
    { in: '2001:0db2::1', want: { family: 'IPv6', value: (0x20010db2n << 96n) | 1n } },
    { in: '2001:0db2::ffff:ffff:ffff:ffff', want: { family: 'IPv6', value: (0x20010db2n << 96n) | ((1n << 64n) - 1n) } },
    { in: '2001:DB8::1', want: { family: 'IPv6', value: (0x20010db8n << 96n) | 1n } },
    { in: '::', want: { family: 'IPv6', value: 0n } },
    { in: '1:2:3:4:5:6:7:8', want: { family: 'IPv6', value: 0x00010002000300040005000600070008n } },
    // IPv4-compatible and IPv4-mapped addresses are IPv6, with the value written.
    { in: '::1.2.3.4', want: { family: 'IPv6', value: 0x01020304n } },
    { in: '::ffff:1.2.3.4', want: { family: 'IPv6', value: 0xffff01020304n } },
    { in: '64:ff9b::10.0.0.1', want: { family: 'IPv6', value: (0x64ff9bn << 96n) | 0x0a000001n } },
    // netip refuses what the sloppy parser accepts.
    { in: '010.1.1.1', want: undefined },
    { in: '10.1.1.01', want: undefined },
    { in: '::ffff:01.2.3.4', want: undefined },
    { in: '00001::', want: undefined },
    // Not addresses at all.
    { in: '', want: undefined },
    { in: '10.0.0.256', want: undefined },
    { in: '10.0.0', want: undefined },
    { in: '10.0.0.0/8', want: undefined },
    { in: '1::2::3', want: undefined },
    { in: '1:2:3:4:5:6:7:8::', want: undefined },
    { in: 'kubernetes', want: undefined },
    // netip accepts a zone; an IPAddress name cannot carry one, and the record has no room for it.
    { in: 'fe80::1%eth0', want: undefined },
  ]
  for (const tc of cases) t.same(parseAddress(tc.in), tc.want, JSON.stringify(tc.in))
  t.end()
})

void t.test('familyOfCIDR answers as netutils.IPFamilyOfCIDRString', (t) => {
  const cases: { in: string, want: Family | undefined }[] = [
    { in: '10.0.0.0/8', want: 'IPv4' },
    { in: '2001:db8::/64', want: 'IPv6' },
    // Whatever ParseCIDRSloppy reads has a family, valid or not.
    { in: '10.0.0.1/8', want: 'IPv4' },
    { in: '192.168.007.0/24', want: 'IPv4' },
    { in: 'FD00:1234::/64', want: 'IPv6' },
    // To4() of an IPv4-mapped address is not nil: IPv4.
    { in: '::ffff:1.1.1.0/120', want: 'IPv4' },
    { in: '::1.2.3.4/128', want: 'IPv6' },
    { in: 'asdasdasd', want: undefined },
    { in: '192.168.0.1', want: undefined },
    { in: 'MN00:1234::/64', want: undefined },
    { in: '10.0.0.0/33', want: undefined },
  ]
  for (const tc of cases) t.equal(familyOfCIDR(tc.in), tc.want, tc.in)
  t.end()
})

void t.test('formatAddress writes what Go writes', (t) => {
  const cases: { family: Family, value: bigint, want: string }[] = [
    { family: 'IPv4', value: 0x0a600001n, want: '10.96.0.1' },
    { family: 'IPv4', value: 0n, want: '0.0.0.0' },
    { family: 'IPv6', value: 0n, want: '::' },
    { family: 'IPv6', value: 1n, want: '::1' },
    { family: 'IPv6', value: 1n << 112n, want: '1::' },
    { family: 'IPv6', value: 0x20010db8000000000000000000000001n, want: '2001:db8::1' },
    { family: 'IPv6', value: 0x20010db8000000010001000100010000n, want: '2001:db8:0:1:1:1:1:0' },
    { family: 'IPv6', value: 0x0001_0000_0000_0000_0001_0000_0000_0001n, want: '1::1:0:0:1' },
    { family: 'IPv6', value: 0x0001_0000_0000_0001_0000_0000_0000_0001n, want: '1:0:0:1::1' },
    { family: 'IPv6', value: 0x0001_0000_0000_0001_0001_0000_0000_0001n, want: '1::1:1:0:0:1' },
    { family: 'IPv6', value: 0xabcd00000000000000000000000000ffn, want: 'abcd::ff' },
    { family: 'IPv6', value: (1n << 128n) - 1n, want: 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff' },
  ]
  for (const tc of cases) t.equal(formatAddress(tc.family, tc.value), tc.want, tc.want)
  t.end()
})

void t.test('makePrefix builds what parseCIDR reads', (t) => {
  for (const text of ['10.96.0.0/12', '0.0.0.0/0', '10.0.0.7/32', 'fd00::/8', '2001:db8:8000::/33', '::/0']) {
    const parsed = prefix(text)
    t.same(makePrefix(parsed.family, parsed.first, parsed.bits), parsed, text)
  }
  t.end()
})

/** The names of the ServiceCIDRs that have a CIDR for which `test` holds, sorted. */
function matching(records: readonly ServiceCIDRRecord[], test: (cidr: Prefix) => boolean): string[] {
  return records.filter((record) => record.cidrs.some(test)).map((record) => record.name).sort()
}

// The ServiceCIDRs of the tables in kubernetes@v1.37.2/pkg/api/servicecidr/servicecidr_test.go.
const one = [serviceCIDR('kubernetes', '10.0.0.0/24', '2001:db8::/96')]
const two = [...one, serviceCIDR('secondary', '10.0.0.0/16', '2001:db8::/64')]
const three = [serviceCIDR('kubernetes', '10.0.0.0/24', '2001:db8::/96'), serviceCIDR('kubernetes2', '10.0.0.0/24', '2001:db8::/96'), serviceCIDR('secondary', '10.0.0.0/16', '2001:db8::/64')]

void t.test('overlaps mirrors netip.Prefix.Overlaps (TestOverlapsPrefix)', (t) => {
  const cases = [
    { name: 'only one ServiceCIDR and IPv4 prefix contained', cidrs: one, prefix: '10.0.0.0/26', want: ['kubernetes'] },
    { name: 'only one ServiceCIDR and same IPv4 prefix', cidrs: one, prefix: '10.0.0.0/24', want: ['kubernetes'] },
    { name: 'only one ServiceCIDR and larger IPv4 prefix', cidrs: one, prefix: '10.0.0.0/16', want: ['kubernetes'] },
    { name: 'only one ServiceCIDR and non contained IPv4 prefix', cidrs: one, prefix: '192.168.0.0/24', want: [] },
    { name: 'only one ServiceCIDR and IPv6 prefix contained', cidrs: one, prefix: '2001:db8::/112', want: ['kubernetes'] },
    { name: 'only one ServiceCIDR and same IPv6 prefix', cidrs: one, prefix: '2001:db8::/96', want: ['kubernetes'] },
    { name: 'only one ServiceCIDR and IPv6 larger', cidrs: one, prefix: '2001:db8::/64', want: ['kubernetes'] },
    { name: 'only one ServiceCIDR and IPv6 prefix out of range', cidrs: one, prefix: '2001:db2::/112', want: [] },
    { name: 'two ServiceCIDR and IPv4 prefix contained', cidrs: two, prefix: '10.0.0.0/24', want: ['kubernetes', 'secondary'] },
    { name: 'two overlapping ServiceCIDR and IPv4 prefix only contained in one', cidrs: two, prefix: '10.0.0.0/18', want: ['kubernetes', 'secondary'] },
    { name: 'two ServiceCIDR and IPv4 larger', cidrs: two, prefix: '10.0.0.0/8', want: ['kubernetes', 'secondary'] },
    { name: 'two ServiceCIDR and IPv4 prefix not contained', cidrs: two, prefix: '192.168.0.0/24', want: [] },
    { name: 'two ServiceCIDR and IPv6 prefix contained', cidrs: two, prefix: '2001:db8::/96', want: ['kubernetes', 'secondary'] },
    { name: 'two ServiceCIDR and IPv6 prefix contained in one', cidrs: two, prefix: '2001:db8::/72', want: ['kubernetes', 'secondary'] },
    { name: 'two ServiceCIDR and aprefix larger', cidrs: two, prefix: '2001:db8::/52', want: ['kubernetes', 'secondary'] },
    { name: 'two ServiceCIDR and prefix out of range', cidrs: two, prefix: '2001:db2::/64', want: [] },
    { name: 'multiple ServiceCIDR match with overlap contained', cidrs: three, prefix: '10.0.0.0/28', want: ['kubernetes', 'kubernetes2', 'secondary'] },
    { name: 'multiple ServiceCIDR match with overlap contains', cidrs: three, prefix: '10.0.0.0/8', want: ['kubernetes', 'kubernetes2', 'secondary'] },
    // Our own: adjacent blocks touch but do not overlap; families never overlap.
    { name: 'adjacent IPv4 block', cidrs: one, prefix: '10.0.1.0/24', want: [] },
    { name: 'block just before', cidrs: one, prefix: '9.255.255.0/24', want: [] },
    { name: 'all of IPv6 does not overlap IPv4', cidrs: [serviceCIDR('v4', '0.0.0.0/0')], prefix: '::/0', want: [] },
    // Single addresses on a block's first and last address: the bounds are inclusive.
    { name: 'a /32 on the first address', cidrs: one, prefix: '10.0.0.0/32', want: ['kubernetes'] },
    { name: 'a /32 on the last address', cidrs: one, prefix: '10.0.0.255/32', want: ['kubernetes'] },
    { name: 'a /32 just past the last address', cidrs: one, prefix: '10.0.1.0/32', want: [] },
    { name: 'a /128 on the first address', cidrs: one, prefix: '2001:db8::/128', want: ['kubernetes'] },
    { name: 'a /128 on the last address', cidrs: one, prefix: '2001:db8::ffff:ffff/128', want: ['kubernetes'] },
    { name: 'a /128 just before the first address', cidrs: one, prefix: '2001:db7:ffff:ffff:ffff:ffff:ffff:ffff/128', want: [] },
  ]
  for (const tc of cases) {
    const wanted = prefix(tc.prefix)
    t.same(matching(tc.cidrs, (cidr) => overlaps(cidr, wanted)), tc.want, tc.name)
    t.same(matching(tc.cidrs, (cidr) => overlaps(wanted, cidr)), tc.want, `${tc.name} (symmetric)`)
  }
  t.end()
})

void t.test('containsPrefix mirrors ContainsPrefix (TestContainsPrefix)', (t) => {
  const cases = [
    { name: 'only one ServiceCIDR and IPv4 prefix contained', cidrs: one, prefix: '10.0.0.0/26', want: ['kubernetes'] },
    { name: 'only one ServiceCIDR and same IPv4 prefix', cidrs: one, prefix: '10.0.0.0/24', want: ['kubernetes'] },
    { name: 'only one ServiceCIDR and larger IPv4 prefix', cidrs: one, prefix: '10.0.0.0/16', want: [] },
    { name: 'only one ServiceCIDR and non containerd IPv4 prefix', cidrs: one, prefix: '192.168.0.0/24', want: [] },
    { name: 'only one ServiceCIDR and IPv6 prefix contained', cidrs: one, prefix: '2001:db8::/112', want: ['kubernetes'] },
    { name: 'only one ServiceCIDR and same IPv6 prefix', cidrs: one, prefix: '2001:db8::/96', want: ['kubernetes'] },
    { name: 'only one ServiceCIDR and IPv6 larger', cidrs: one, prefix: '2001:db8::/64', want: [] },
    { name: 'only one ServiceCIDR and IPv6 prefix out of range', cidrs: one, prefix: '2001:db2::/112', want: [] },
    { name: 'two ServiceCIDR and IPv4 prefix contained', cidrs: two, prefix: '10.0.0.0/24', want: ['kubernetes', 'secondary'] },
    { name: 'two ServiceCIDR and IPv4 prefix only contained in one', cidrs: two, prefix: '10.0.0.0/18', want: ['secondary'] },
    { name: 'two ServiceCIDR and IPv4 larger', cidrs: two, prefix: '10.0.0.0/8', want: [] },
    { name: 'two ServiceCIDR and IPv4 prefix not contained', cidrs: two, prefix: '192.168.0.0/24', want: [] },
    { name: 'two ServiceCIDR and IPv6 prefix contained', cidrs: two, prefix: '2001:db8::/96', want: ['kubernetes', 'secondary'] },
    { name: 'two ServiceCIDR and IPv6 prefix contained in one', cidrs: two, prefix: '2001:db8::/72', want: ['secondary'] },
    { name: 'two ServiceCIDR and aprefix larger', cidrs: two, prefix: '2001:db8::/52', want: [] },
    { name: 'two ServiceCIDR and prefix out of range', cidrs: two, prefix: '2001:db2::/64', want: [] },
    { name: 'multiple ServiceCIDR match with overlap', cidrs: three, prefix: '10.0.0.0/28', want: ['kubernetes', 'kubernetes2', 'secondary'] },
  ]
  for (const tc of cases) {
    const inner = prefix(tc.prefix)
    t.same(matching(tc.cidrs, (cidr) => containsPrefix(cidr, inner)), tc.want, tc.name)
  }
  t.end()
})

void t.test('prefixContainsAddress mirrors PrefixContainsIP', (t) => {
  // Test_PrefixContainIP in kubernetes@v1.37.2/pkg/api/servicecidr/servicecidr_test.go, then edges.
  const cases = [
    { name: 'IPv4 contains', prefix: '192.168.0.0/24', ip: '192.168.0.1', want: true },
    { name: 'IPv4 network address', prefix: '192.168.0.0/24', ip: '192.168.0.0', want: false },
    { name: 'IPv4 broadcast address', prefix: '192.168.0.0/24', ip: '192.168.0.255', want: false },
    { name: 'IPv4 does not contain', prefix: '192.168.0.0/24', ip: '192.168.1.2', want: false },
    { name: 'IPv6 contains', prefix: '2001:db2::/96', ip: '2001:db2::1', want: true },
    { name: 'IPv6 network address', prefix: '2001:db2::/96', ip: '2001:db2::', want: false },
    { name: 'IPv6 broadcast address', prefix: '2001:db2::/96', ip: '2001:db2::ffff:ffff', want: true },
    { name: 'IPv6 does not contain', prefix: '2001:db2::/96', ip: '2001:db2:1:2:3::1', want: false },
    { name: 'IPv4 last allocatable address', prefix: '192.168.0.0/24', ip: '192.168.0.254', want: true },
    { name: 'IPv4 /31 holds nothing', prefix: '192.168.0.0/31', ip: '192.168.0.1', want: false },
    { name: 'IPv4 /32 holds nothing', prefix: '192.168.0.1/32', ip: '192.168.0.1', want: false },
    { name: 'IPv6 /127 holds its all-ones address', prefix: '2001:db2::/127', ip: '2001:db2::1', want: true },
    { name: 'IPv6 /128 holds nothing', prefix: '2001:db2::1/128', ip: '2001:db2::1', want: false },
    { name: 'address just past the end', prefix: '192.168.0.0/24', ip: '192.168.1.0', want: false },
    { name: 'other family', prefix: '0.0.0.0/0', ip: '::ffff:10.0.0.1', want: false },
  ]
  for (const tc of cases) {
    const address = parseAddress(tc.ip)
    if (address === undefined) throw new Error(`bad test address ${tc.ip}`)
    t.equal(prefixContainsAddress(prefix(tc.prefix), address), tc.want, tc.name)
  }
  t.end()
})

void t.test('prefixContainsAddress gives the ServiceCIDRs ContainsAddress lists', (t) => {
  // TestContainsAddress (pkg/api/servicecidr) and TestController_ipToCidrs (pkg/controller/servicecidrs).
  const four = [
    serviceCIDR('kubernetes', '192.168.0.0/24', '2001:db2::/64'),
    serviceCIDR('overlapping', '192.168.0.0/24', '2001:db2::/64'),
    serviceCIDR('overlapping2', '192.168.0.0/26', '2001:db2::/96'),
    serviceCIDR('unrelated', '10.0.0.0/24'),
    serviceCIDR('unrelated2', '10.0.0.0/16'),
  ]
  const cases = [
    { name: 'only one ServiceCIDR and IPv4 address contained', cidrs: one, ip: '10.0.0.1', want: ['kubernetes'] },
    { name: 'only one ServiceCIDR and IPv4 address broadcast', cidrs: one, ip: '10.0.0.255', want: [] },
    { name: 'only one ServiceCIDR and IPv4 address base', cidrs: one, ip: '10.0.0.0', want: [] },
    { name: 'only one ServiceCIDR and IPv4 address out of range', cidrs: one, ip: '192.0.0.1', want: [] },
    { name: 'only one ServiceCIDR and IPv6 address contained', cidrs: one, ip: '2001:db8::2:3', want: ['kubernetes'] },
    { name: 'only one ServiceCIDR and IPv6 address broadcast', cidrs: one, ip: '2001:db8::ffff:ffff', want: ['kubernetes'] },
    { name: 'only one ServiceCIDR and IPv6 address base', cidrs: one, ip: '2001:db8::', want: [] },
    { name: 'only one ServiceCIDR and IPv6 address out of range', cidrs: one, ip: '2002:1:2:3::2', want: [] },
    { name: 'two ServiceCIDR and IPv4 address contained', cidrs: two, ip: '10.0.0.1', want: ['kubernetes', 'secondary'] },
    { name: 'two ServiceCIDR and IPv4 address broadcast', cidrs: two, ip: '10.0.0.255', want: ['secondary'] },
    { name: 'two ServiceCIDR and IPv4 address base', cidrs: two, ip: '10.0.0.0', want: [] },
    { name: 'two ServiceCIDR and IPv4 address out of range', cidrs: two, ip: '192.0.0.1', want: [] },
    { name: 'two ServiceCIDR and IPv6 address contained', cidrs: two, ip: '2001:db8::2:3', want: ['kubernetes', 'secondary'] },
    { name: 'two ServiceCIDR and address broadcast', cidrs: two, ip: '2001:db8::ffff:ffff', want: ['kubernetes', 'secondary'] },
    { name: 'two ServiceCIDR and address base', cidrs: two, ip: '2001:db8::', want: [] },
    { name: 'two ServiceCIDR and address out of range', cidrs: two, ip: '2002:1:2:3::2', want: [] },
    { name: 'multiple ServiceCIDR match with overlap', cidrs: three, ip: '10.0.0.2', want: ['kubernetes', 'kubernetes2', 'secondary'] },
    { name: 'ipToCidrs: empty', cidrs: [], ip: '192.168.0.23', want: [] },
    { name: 'ipToCidrs: one CIDR', cidrs: [four[0]!, four[3]!, four[4]!], ip: '192.168.0.23', want: ['kubernetes'] },
    { name: 'ipToCidrs: three CIDR - two same and one larger', cidrs: four, ip: '192.168.0.23', want: ['kubernetes', 'overlapping', 'overlapping2'] },
    { name: 'ipToCidrs: IPv4 subnet address', cidrs: four, ip: '192.168.0.0', want: [] },
    { name: 'ipToCidrs: IPv4 broadcast address of the /26', cidrs: four, ip: '192.168.0.63', want: ['kubernetes', 'overlapping'] },
    { name: 'ipToCidrs: IPv6 subnet address', cidrs: four, ip: '2001:db2::', want: [] },
    { name: 'ipToCidrs: IPv6 broadcast address', cidrs: four, ip: '2001:0db2::ffff:ffff:ffff:ffff', want: ['kubernetes', 'overlapping'] },
  ]
  for (const tc of cases) {
    const address = parseAddress(tc.ip)
    if (address === undefined) throw new Error(`bad test address ${tc.ip}`)
    t.same(matching(tc.cidrs, (cidr) => prefixContainsAddress(cidr, address)), tc.want, tc.name)
  }
  t.end()
})

void t.test('the last address of a prefix is its broadcast address (TestBroadcastAddress)', (t) => {
  const cases = [
    { name: 'IPv4 even mask', prefix: '192.168.0.0/24', want: '192.168.0.255' },
    { name: 'IPv4 odd mask', prefix: '192.168.0.0/23', want: '192.168.1.255' },
    { name: 'IPv6 even mask', prefix: 'fd00:1:2:3::/64', want: 'fd00:1:2:3:ffff:ffff:ffff:ffff' },
    { name: 'IPv6 odd mask', prefix: 'fd00:1:2::/57', want: 'fd00:1:2:7f:ffff:ffff:ffff:ffff' },
  ]
  for (const tc of cases) {
    const parsed = prefix(tc.prefix)
    t.equal(formatAddress(parsed.family, parsed.last), tc.want, tc.name)
  }
  t.end()
})

void t.test('allocatableRange leaves out the network address, and the IPv4 broadcast address', (t) => {
  const cases = [
    { prefix: '10.0.0.0/24', first: '10.0.0.1', last: '10.0.0.254' },
    { prefix: '10.0.0.0/30', first: '10.0.0.1', last: '10.0.0.2' },
    { prefix: '2001:db8::/64', first: '2001:db8::1', last: '2001:db8::ffff:ffff:ffff:ffff' },
    { prefix: '2001:db8::/127', first: '2001:db8::1', last: '2001:db8::1' },
  ]
  for (const tc of cases) {
    const parsed = prefix(tc.prefix)
    const range = allocatableRange(parsed)
    t.same([formatAddress(parsed.family, range.first), formatAddress(parsed.family, range.last)], [tc.first, tc.last], tc.prefix)
  }
  // Empty ranges: last before first.
  for (const text of ['10.0.0.0/31', '10.0.0.0/32', '2001:db8::/128']) {
    const range = allocatableRange(prefix(text))
    t.ok(range.last < range.first, `${text} allocates nothing`)
  }
  t.end()
})

void t.test('allocatableSize mirrors hostsPerNetwork (Test_hostsPerNetwork)', (t) => {
  const maxUint64 = 2n ** 64n - 1n
  const cases = [
    { name: 'supported IPv4 cidr', cidr: '192.168.1.0/24', addrs: 254n },
    { name: 'single IPv4 host', cidr: '192.168.1.0/32', addrs: 0n },
    { name: 'small IPv4 cidr', cidr: '192.168.1.0/31', addrs: 0n },
    { name: 'very large IPv4 cidr', cidr: '0.0.0.0/1', addrs: 2n ** 31n - 1n - 1n },
    { name: 'full IPv4 range', cidr: '0.0.0.0/0', addrs: 2n ** 32n - 1n - 1n },
    { name: 'supported IPv6 cidr', cidr: '2001:db2::/112', addrs: 65535n },
    { name: 'single IPv6 host', cidr: '2001:db8::/128', addrs: 0n },
    { name: 'small IPv6 cidr', cidr: '2001:db8::/127', addrs: 1n },
    { name: 'largest IPv6 for Int64', cidr: '2001:db8::/65', addrs: 2n ** 63n - 1n },
    { name: 'largest IPv6 for Uint64', cidr: '2001:db8::/64', addrs: maxUint64 },
    { name: 'very large IPv6 cidr', cidr: '::/1', addrs: maxUint64, refused: true },
    { name: 'IPv4 /30', cidr: '10.0.0.0/30', addrs: 2n },
    { name: 'all of IPv6', cidr: '::/0', addrs: maxUint64, refused: true },
    { name: 'IPv6 one bit shorter than /64', cidr: '2001:db8::/63', addrs: maxUint64, refused: true },
  ]
  for (const tc of cases) {
    const parsed = prefix(tc.cidr)
    // NewIPAllocator refuses IPv6 prefixes shorter than /64 before it counts: they allocate nothing.
    t.equal(allocatableSize(parsed), 'refused' in tc ? 0n : tc.addrs, tc.name)
    t.equal(hostsPerNetwork(parsed.family, parsed.bits), tc.addrs, `${tc.name} (by family and length)`)
  }
  t.end()
})

void t.test('invalidIPAddressName: IsValidIP, which ValidateIPAddressName calls', (t) => {
  const cases: [string, string | undefined][] = [
    ['10.0.0.1', undefined],
    ['2001:db8::1', undefined],
    ['::', undefined],
    ['2001:0db8::1', 'must be in canonical form ("2001:db8::1")'],
    ['2001:DB8::1', 'must be in canonical form ("2001:db8::1")'],
    ['2001:db8:0:0:0:0:0:1', 'must be in canonical form ("2001:db8::1")'],
    ['010.0.0.1', 'must not have leading 0s'],
    ['::ffff:10.0.0.1', 'must not be an IPv4-mapped IPv6 address'],
    ['fe80::1%eth0', 'must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)'],
    ['10.0.0.0/24', 'must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)'],
    ['', 'must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)'],
  ]
  for (const [name, reason] of cases) t.equal(invalidIPAddressName(name), reason, JSON.stringify(name))
  t.end()
})
