// IP addresses and CIDR prefixes as Kubernetes sees them. Pure: no I/O.
//
// Addresses are bigints in their family's space (32 or 128 bits), so that IPv4 and IPv6 share one
// code path. Families are named as the `ipaddress.kubernetes.io/ip-family` label names them.

export type Family = 'IPv4' | 'IPv6'

export interface Prefix {
  readonly family: Family
  readonly bits: number
  /** The network address. */
  readonly first: bigint
  /** The last address (IPv4 broadcast, IPv6 all-ones). */
  readonly last: bigint
  /** Canonical text, as Kubernetes stores it. */
  readonly text: string
}

export interface Address {
  readonly family: Family
  readonly value: bigint
}

export type Parsed<T> = { readonly ok: true, readonly value: T } | { readonly ok: false, readonly error: string }

export const familyWidth = (family: Family): number => (family === 'IPv4' ? 32 : 128)

/** IPv4 dotted quad; IPv6 as netip's Addr.String: RFC 5952, lower case, the first longest run of two or more zero groups as "::". */
export function formatAddress(family: Family, value: bigint): string {
  if (family === 'IPv4') {
    // Below 2^32, so exact as a number; `>>>` reads it as an unsigned 32-bit integer.
    const number = Number(value)
    return `${number >>> 24}.${(number >>> 16) & 0xff}.${(number >>> 8) & 0xff}.${number & 0xff}`
  }
  const groups = [112n, 96n, 80n, 64n, 48n, 32n, 16n, 0n].map((shift) => Number((value >> shift) & 0xffffn))
  let zeroStart = -1
  let zeroLength = 1
  for (let i = 0; i < groups.length; i++) {
    let j = i
    while (j < groups.length && groups[j] === 0) j++
    if (j - i > zeroLength) [zeroStart, zeroLength] = [i, j - i]
  }
  const hex = (part: readonly number[]): string => part.map((group) => group.toString(16)).join(':')
  if (zeroStart < 0) return hex(groups)
  return `${hex(groups.slice(0, zeroStart))}::${hex(groups.slice(zeroStart + zeroLength))}`
}

// Kubernetes validates in two passes (apimachinery's parseCIDR): a "sloppy" parse with
// k8s.io/utils/net's ParseCIDRSloppy, a fork of Go's pre-1.17 net.ParseCIDR, decides whether the
// text is a CIDR at all; then netip.ParsePrefix, which is stricter, decides whether it is written
// acceptably. The parsers below port the sloppy one and note where netip would refuse the same text.

interface RawAddress {
  readonly family: Family
  readonly value: bigint
  /** netip.ParseAddr accepts it too: no leading zeros in IPv4 octets, at most 4 hex digits in an IPv6 group. */
  readonly strict: boolean
}

interface Digits {
  readonly value: number
  readonly length: number
}

/** The value of an ASCII digit (0-9, and a-f or A-F in base 16), or -1. */
function digitValue(code: number, base: 10 | 16): number {
  if (code >= 0x30 && code <= 0x39) return code - 0x30
  // 0x20 is the bit between upper and lower case: 'A'-'F' and 'a'-'f' both become 'a'-'f'.
  const lower = code | 0x20
  return base === 16 && lower >= 0x61 && lower <= 0x66 ? lower - 0x61 + 10 : -1
}

/** The number at the start of `text`, as dtoi (base 10) or xtoi (base 16) in the forked Go net package. */
function leadingNumber(text: string, base: 10 | 16): Digits | undefined {
  let value = 0
  let length = 0
  while (length < text.length) {
    const digit = digitValue(text.charCodeAt(length), base)
    if (digit < 0) break
    value = value * base + digit
    length++
    // Go stops at 0xFFFFFF (`big`) so that the value cannot overflow; any such number is out of range.
    if (value >= 0xffffff) return undefined
  }
  return length === 0 ? undefined : { value, length }
}

/** parseIPv4 of the forked Go net package: leading zeros allowed (https://issue.k8s.io/100895). */
function parseIPv4Sloppy(text: string): RawAddress | undefined {
  let rest = text
  let value = 0
  let strict = true
  for (let i = 0; i < 4; i++) {
    if (i > 0) {
      if (!rest.startsWith('.')) return undefined
      rest = rest.slice(1)
    }
    const octet = leadingNumber(rest, 10)
    if (octet === undefined || octet.value > 0xff) return undefined
    if (octet.length > 1 && rest.startsWith('0')) strict = false
    value = value * 256 + octet.value
    rest = rest.slice(octet.length)
  }
  return rest === '' ? { family: 'IPv4', value: BigInt(value), strict } : undefined
}

/**
 * parseIPv6 of the forked Go net package: groups of any number of hex digits up to 0xFFFF, one
 * "::", and an IPv4 dotted quad in the last 32 bits. No zones: neither ParseCIDRSloppy nor
 * netip.ParsePrefix accepts them.
 */
function parseIPv6Sloppy(text: string): RawAddress | undefined {
  const groups: number[] = []
  let ellipsis = -1
  let strict = true
  let rest = text
  if (rest.startsWith('::')) {
    ellipsis = 0
    rest = rest.slice(2)
  }
  while (rest !== '' && groups.length < 8) {
    const group = leadingNumber(rest, 16)
    if (group === undefined || group.value > 0xffff) return undefined
    if (rest.charAt(group.length) === '.') {
      // A trailing IPv4 address fills the last two groups.
      if ((ellipsis < 0 && groups.length !== 6) || groups.length > 6) return undefined
      const ipv4 = parseIPv4Sloppy(rest)
      if (ipv4 === undefined) return undefined
      strict &&= ipv4.strict
      groups.push(Number(ipv4.value >> 16n), Number(ipv4.value & 0xffffn))
      rest = ''
      break
    }
    if (group.length > 4) strict = false
    groups.push(group.value)
    rest = rest.slice(group.length)
    if (rest === '') break
    if (!rest.startsWith(':') || rest.length === 1) return undefined
    rest = rest.slice(1)
    if (rest.startsWith(':')) {
      if (ellipsis >= 0) return undefined
      ellipsis = groups.length
      rest = rest.slice(1)
    }
  }
  if (rest !== '') return undefined
  if (groups.length < 8) {
    if (ellipsis < 0) return undefined
    groups.splice(ellipsis, 0, ...new Array<number>(8 - groups.length).fill(0))
  } else if (ellipsis >= 0) {
    // "::" must stand for at least one zero group.
    return undefined
  }
  const value = groups.reduce((sum, group) => (sum << 16n) | BigInt(group), 0n)
  return { family: 'IPv6', value, strict }
}

/** An IPv4-mapped IPv6 address (::ffff:a.b.c.d), which Go's To4 and netip's Is4In6 recognise. */
const isIPv4Mapped = (address: Address): boolean => address.family === 'IPv6' && address.value >> 32n === 0xffffn

/**
 * Parses an IP address as netip.ParseAddr does: IPv4 without leading zeros, IPv6 in any valid
 * notation (IPAddress names are canonical when the apiserver wrote them, but Kubernetes' own tests
 * use names like "2001:0db2::1"). IPv4-mapped IPv6 addresses are IPv6 here, as in netip. Zones
 * ("fe80::1%eth0"), which netip accepts, are refused: an IPAddress name cannot hold one.
 */
export function parseAddress(text: string): Address | undefined {
  const raw = parseIPv4Sloppy(text) ?? parseIPv6Sloppy(text)
  if (raw === undefined || !raw.strict) return undefined
  return { family: raw.family, value: raw.value }
}

/**
 * Why `text` is not a name kube-apiserver gives an IPAddress, with the messages of apimachinery's
 * `IsValidIP` (which ValidateIPAddressName calls): a valid IP, no leading zeros, no IPv4-mapped
 * IPv6, canonical form. Undefined for a valid name. A cluster holds no other names, so two names
 * never spell one address there. `address` is parseAddress(text), when the caller has it already.
 */
export function invalidIPAddressName(text: string, address: Address | undefined = parseAddress(text)): string | undefined {
  if (address === undefined) {
    // netip.ParseAddr refuses what ParseIPSloppy reads only for leading zeros.
    return parseIPv4Sloppy(text) ?? parseIPv6Sloppy(text) ? 'must not have leading 0s' : 'must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)'
  }
  if (isIPv4Mapped(address)) return 'must not be an IPv4-mapped IPv6 address'
  const canonical = formatAddress(address.family, address.value)
  return canonical === text ? undefined : `must be in canonical form ("${canonical}")`
}

interface RawPrefix {
  readonly address: RawAddress
  readonly bits: number
  /** netip.ParsePrefix accepts the address and the prefix length as written. */
  readonly strict: boolean
}

/** ParseCIDRSloppy (k8s.io/utils/net): the address and a prefix length, either may have leading zeros. */
function parseCIDRSloppy(text: string): RawPrefix | undefined {
  const slash = text.indexOf('/')
  if (slash < 0) return undefined
  const address = parseIPv4Sloppy(text.slice(0, slash)) ?? parseIPv6Sloppy(text.slice(0, slash))
  const bitsText = text.slice(slash + 1)
  const bits = leadingNumber(bitsText, 10)
  if (address === undefined || bits === undefined || bits.length !== bitsText.length) return undefined
  if (bits.value > familyWidth(address.family)) return undefined
  const strict = address.strict && !(bitsText.length > 1 && bitsText.startsWith('0'))
  return { address, bits: bits.value, strict }
}

/**
 * The family netutils.IPFamilyOfCIDRString gives a CIDR: that of whatever ParseCIDRSloppy reads,
 * even from a CIDR that IsValidCIDR refuses; an IPv4-mapped IPv6 address counts as IPv4.
 * Undefined when ParseCIDRSloppy fails.
 */
export function familyOfCIDR(text: string): Family | undefined {
  const raw = parseCIDRSloppy(text)
  if (raw === undefined) return undefined
  return isIPv4Mapped(raw.address) ? 'IPv4' : raw.address.family
}

const invalidCIDR = 'must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)'

/**
 * What parseCIDR answered for texts it has seen, so that a text is parsed once, not at every
 * review: the request's own CIDRs are parsed by the validity rule, again as the range it reserves,
 * and the shared Lease's entries at every recheck. A parse made 1.8 KB of garbage (its bigints and
 * substrings), the largest share of a review's (docs/benchmarks.md, "Fifth pass"). The answers are
 * immutable; the memo is emptied when full, so hostile input cannot grow it.
 */
const parsedCIDRs = new Map<string, Parsed<Prefix>>()
const parsedCIDRsLimit = 4096
/** The longest a CIDR can be written without leading zeros: "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255/128". */
const longestCIDR = 49

/**
 * Parses a CIDR with the rules of apimachinery's `IsValidCIDR`
 * (k8s.io/apimachinery/pkg/util/validation/ip.go), with its messages, in its order: the sloppy
 * parse, then no leading zeros, no IPv4-mapped IPv6, no bits set beyond the prefix length, and the
 * canonical string form.
 */
export function parseCIDR(text: string): Parsed<Prefix> {
  let parsed = parsedCIDRs.get(text)
  if (parsed === undefined) {
    parsed = parseCIDRText(text)
    // Only texts as long as a CIDR can be: a hostile review's megabyte string is parsed, not kept.
    if (text.length <= longestCIDR) {
      if (parsedCIDRs.size >= parsedCIDRsLimit) parsedCIDRs.clear()
      parsedCIDRs.set(text, parsed)
    }
  }
  return parsed
}

function parseCIDRText(text: string): Parsed<Prefix> {
  const raw = parseCIDRSloppy(text)
  if (raw === undefined) return { ok: false, error: invalidCIDR }
  const { address, bits } = raw
  if (!raw.strict) return { ok: false, error: 'must not have leading 0s in IP or prefix length' }
  if (isIPv4Mapped(address)) return { ok: false, error: 'must not have an IPv4-mapped IPv6 address' }
  const hostMask = (1n << BigInt(familyWidth(address.family) - bits)) - 1n
  if ((address.value & hostMask) !== 0n) return { ok: false, error: 'must not have bits set beyond the prefix length' }
  const canonical = `${formatAddress(address.family, address.value)}/${bits}`
  if (canonical !== text) return { ok: false, error: `must be in canonical form ("${canonical}")` }
  return { ok: true, value: { family: address.family, bits, first: address.value, last: address.value | hostMask, text } }
}

/** parseCIDR for texts written in the source, like netip.MustParsePrefix: throws if the text is not a canonical CIDR. */
export function mustParseCIDR(text: string): Prefix {
  const parsed = parseCIDR(text)
  if (!parsed.ok) throw new Error(`${JSON.stringify(text)} ${parsed.error}`)
  return parsed.value
}

/** Builds a prefix from its network address; `first` must have no host bits. */
export function makePrefix(family: Family, first: bigint, bits: number): Prefix {
  const hostMask = (1n << BigInt(familyWidth(family) - bits)) - 1n
  return { family, bits, first, last: first | hostMask, text: `${formatAddress(family, first)}/${bits}` }
}

export const overlaps = (a: Prefix, b: Prefix): boolean =>
  a.family === b.family && a.first <= b.last && b.first <= a.last

/** `outer` contains all of `inner` (netip: outer.Overlaps(inner) && outer.Bits() <= inner.Bits()). */
export const containsPrefix = (outer: Prefix, inner: Prefix): boolean =>
  overlaps(outer, inner) && outer.bits <= inner.bits

/**
 * The addresses a ServiceCIDR can allocate: all but the network address, and for IPv4 all but the
 * broadcast address. Mirrors `PrefixContainsIP` in kubernetes pkg/api/servicecidr/servicecidr.go,
 * which decides which ServiceCIDRs "contain" an IPAddress.
 */
export function allocatableRange(prefix: Prefix): { readonly first: bigint, readonly last: bigint } {
  return { first: prefix.first + 1n, last: prefix.family === 'IPv4' ? prefix.last - 1n : prefix.last }
}

export function prefixContainsAddress(prefix: Prefix, address: Address): boolean {
  if (prefix.family !== address.family) return false
  const range = allocatableRange(prefix)
  return address.value >= range.first && address.value <= range.last
}

/** The largest uint64, where the allocator's count saturates. */
const maxUint64 = (1n << 64n) - 1n

/**
 * How many addresses a prefix of `bits` can allocate, as `hostsPerNetwork` in kubernetes
 * pkg/registry/core/service/ipallocator/ipallocator.go counts them: 2^n - 1 for IPv6 and 2^n - 2
 * for IPv4 (n host bits; 0 for an IPv4 /31 or /32), saturated at 2^64 - 1 because the allocator
 * counts in a uint64.
 */
export function hostsPerNetwork(family: Family, bits: number): bigint {
  const hostBits = familyWidth(family) - bits
  if (hostBits >= 64) return maxUint64
  const size = (1n << BigInt(hostBits)) - (family === 'IPv4' ? 2n : 1n)
  return size > 0n ? size : 0n
}

/**
 * The shortest IPv6 ServiceCIDR that kube-apiserver allocates from: `NewIPAllocator` in kubernetes
 * pkg/registry/core/service/ipallocator/ipallocator.go refuses a shorter one ("shortest allowed
 * prefix length for service CIDR is 64"), and cidrallocator.go's syncAllocators then skips it. The
 * ServiceCIDR is valid and exists, but no Service ever gets an address from it.
 */
export const shortestIPv6ServiceCIDR = 64

/** Whether kube-apiserver's allocator hands out addresses from the prefix (see shortestIPv6ServiceCIDR). */
export const allocates = (prefix: Prefix): boolean => prefix.family === 'IPv4' || prefix.bits >= shortestIPv6ServiceCIDR

/** How many addresses the prefix can allocate (see hostsPerNetwork): none from a prefix the allocator refuses. */
export const allocatableSize = (prefix: Prefix): bigint => (allocates(prefix) ? hostsPerNetwork(prefix.family, prefix.bits) : 0n)
