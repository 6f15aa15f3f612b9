// ip.ts against an independent implementation: ipaddr.js, on random addresses and prefixes.
// ip.ts ports Kubernetes' own parsers (ipaddr.js reads "::a.b.c.d" as IPv4-mapped, which
// netip does not), so the comparison keeps to forms both define the same way: canonical text of
// addresses outside ::ffff:0:0/96.

import t from 'tap'
import fc from 'fast-check'
import ipaddr from 'ipaddr.js'
import { formatAddress, parseAddress, parseCIDR } from '../../../src/policy/ip.ts'
import { fuzzParameters } from '../../support/fuzz.ts'
import { canonicalRange } from '../../support/ip-oracle.ts'

// A fixed seed: a failure names an input that reproduces.
let seed = 0x5eed
function random32(): number {
  seed = (seed * 1103515245 + 12345) >>> 0
  return seed
}
const random128 = (): bigint => [0, 1, 2, 3].reduce((value) => (value << 32n) | BigInt(random32()), 0n)
/** Random values with runs of zero groups, so that "::" compression is exercised. */
function sparse128(): bigint {
  let value = random128()
  for (let group = 0; group < 8; group++) if (random32() % 3 === 0) value &= ~(0xffffn << BigInt(group * 16))
  return value
}

t.test('IPv6 formatting matches ipaddr.js RFC 5952 output', (t) => {
  let compared = 0
  for (let i = 0; i < 5000; i++) {
    const value = i % 2 === 0 ? random128() : sparse128()
    if (value >> 32n === 0xffffn) continue
    const bytes = Array.from({ length: 16 }, (_, index) => Number((value >> BigInt(8 * (15 - index))) & 0xffn))
    const expected = new ipaddr.IPv6(bytes).toRFC5952String()
    if (formatAddress('IPv6', value) !== expected) t.fail(`${value.toString(16)}: ${formatAddress('IPv6', value)} != ${expected}`)
    const parsed = parseAddress(expected)
    if (parsed?.value !== value) t.fail(`${expected} parsed to ${parsed?.value.toString(16) ?? 'nothing'}`)
    compared++
  }
  t.ok(compared > 4900, `${compared} addresses compared`)
  t.end()
})

t.test('IPv4 formatting and parsing match ipaddr.js', (t) => {
  for (let i = 0; i < 5000; i++) {
    const value = random32()
    const text = ipaddr.fromByteArray([value >>> 24, (value >>> 16) & 255, (value >>> 8) & 255, value & 255]).toString()
    if (formatAddress('IPv4', BigInt(value)) !== text) t.fail(`${value}: ${formatAddress('IPv4', BigInt(value))} != ${text}`)
    if (parseAddress(text)?.value !== BigInt(value)) t.fail(`${text} did not parse back`)
  }
  t.pass('5000 addresses compared')
  t.end()
})

t.test('canonical CIDRs parse to the network and broadcast ipaddr.js computes', (t) => {
  for (let i = 0; i < 2000; i++) {
    const v6 = i % 2 === 1
    const bits = random32() % (v6 ? 129 : 33)
    const address = v6 ? ipaddr.IPv6.networkAddressFromCIDR(`${new ipaddr.IPv6(Array.from({ length: 16 }, () => random32() & 255)).toString()}/${bits}`) : ipaddr.IPv4.networkAddressFromCIDR(`${ipaddr.fromByteArray([random32() & 255, random32() & 255, random32() & 255, random32() & 255]).toString()}/${bits}`)
    if (address.kind() === 'ipv6' && (address as ipaddr.IPv6).isIPv4MappedAddress()) continue
    const text = `${address.kind() === 'ipv6' ? (address as ipaddr.IPv6).toRFC5952String() : address.toString()}/${bits}`
    const parsed = parseCIDR(text)
    if (!parsed.ok) {
      t.fail(`${text}: ${parsed.error}`)
      continue
    }
    const broadcast = v6 ? ipaddr.IPv6.broadcastAddressFromCIDR(text) : ipaddr.IPv4.broadcastAddressFromCIDR(text)
    const last = broadcast.toByteArray().reduce((value, byte) => (value << 8n) | BigInt(byte), 0n)
    if (parsed.value.last !== last) t.fail(`${text}: last ${parsed.value.last.toString(16)} != ${last.toString(16)}`)
  }
  t.pass('2000 prefixes compared')
  t.end()
})

// Generated strings around CIDR syntax (fast-check, a fresh seed each run; test/support/fuzz.ts).
const v4Text = fc.tuple(fc.nat(0xffffffff), fc.integer({ min: 0, max: 32 })).map(([value, bits]) =>
  `${ipaddr.IPv4.networkAddressFromCIDR(`${ipaddr.fromByteArray([value >>> 24, (value >>> 16) & 255, (value >>> 8) & 255, value & 255]).toString()}/${bits}`).toString()}/${bits}`)
const v6Text = fc.tuple(fc.array(fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 0xffff })), { minLength: 8, maxLength: 8 }), fc.integer({ min: 0, max: 128 })).map(([groups, bits]) => {
  const address = new ipaddr.IPv6(groups)
  return `${ipaddr.IPv6.networkAddressFromCIDR(`${address.toString()}/${bits}`).toRFC5952String()}/${bits}`
})
/** A canonical CIDR with one character inserted, replaced or removed, or one of the forms people write. */
const cidrLike = fc.oneof(
  v4Text,
  v6Text,
  fc.tuple(fc.oneof(v4Text, v6Text), fc.nat(), fc.constantFrom(...Array.from('0123456789abcdefABCDEF:./%-x '))).chain(([text, at, char]) => {
    const i = at % (text.length + 1)
    return fc.constantFrom(text.slice(0, i) + char + text.slice(i), text.slice(0, i) + char + text.slice(i + 1), text.slice(0, i) + text.slice(i + 1))
  }),
  v4Text.map((text) => `::ffff:${text.replace(/\/(\d+)$/, (_, bits: string) => `/${96 + Number(bits)}`)}`),
  v4Text.map((text) => `::${text.replace(/\/(\d+)$/, (_, bits: string) => `/${96 + Number(bits)}`)}`),
  v6Text.map((text) => text.toUpperCase()),
  fc.string({ maxLength: 24 }),
)

t.test('generated strings: parseCIDR accepts exactly the CIDRs ipaddr.js writes the same way, with the same range', (t) => {
  let accepted = 0
  fc.assert(fc.property(cidrLike, (text) => {
    const parsed = parseCIDR(text)
    const oracle = canonicalRange(text)
    if (!parsed.ok) return oracle === undefined
    accepted++
    return oracle !== undefined && oracle.first === parsed.value.first && oracle.last === parsed.value.last && oracle.bits === parsed.value.bits &&
      oracle.v6 === (parsed.value.family === 'IPv6')
  }), fuzzParameters(5000))
  t.ok(accepted > 1500, `${accepted} of 5000 accepted and compared`)
  t.end()
})
