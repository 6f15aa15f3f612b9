// IP addresses and CIDR prefixes as Kubernetes sees them. Pure: no I/O.
//
// Addresses are bigints in their family's space (32 or 128 bits), so that IPv4 and IPv6 share one
// code path. Families are named as the `ipaddress.kubernetes.io/ip-family` label names them.

import ipaddr from 'ipaddr.js'

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

const ipv4Sloppy = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/
const ipv6Chars = /^[0-9a-fA-F:.]+$/

function bytesToBigInt(bytes: readonly number[]): bigint {
  let value = 0n
  for (const byte of bytes) value = (value << 8n) | BigInt(byte)
  return value
}

function bigIntToBytes(value: bigint, length: number): number[] {
  const bytes = new Array<number>(length)
  for (let i = length - 1; i >= 0; i--) {
    bytes[i] = Number(value & 0xffn)
    value >>= 8n
  }
  return bytes
}

export function formatAddress(family: Family, value: bigint): string {
  if (family === 'IPv4') return bigIntToBytes(value, 4).join('.')
  return new ipaddr.IPv6(bigIntToBytes(value, 16)).toRFC5952String()
}

interface RawAddress {
  family: Family
  value: bigint
  /** Octets with leading zeros ("010.1.1.1"): parsed by Kubernetes' sloppy parser, refused by the strict one. */
  leadingZeros: boolean
  /** An IPv4-mapped IPv6 address (::ffff:a.b.c.d). */
  mapped: boolean
}

function parseRawAddress(text: string): RawAddress | undefined {
  const v4 = ipv4Sloppy.exec(text)
  if (v4) {
    const octets = v4.slice(1).map(Number)
    if (octets.some((octet) => octet > 255)) return undefined
    const leadingZeros = v4.slice(1).some((octet) => octet.length > 1 && octet.startsWith('0'))
    return { family: 'IPv4', value: bytesToBigInt(octets), leadingZeros, mapped: false }
  }
  // No zones ("fe80::1%eth0"): neither netip.ParsePrefix nor Kubernetes accepts them here.
  if (!text.includes(':') || !ipv6Chars.test(text) || !ipaddr.IPv6.isValid(text)) return undefined
  const address = ipaddr.IPv6.parse(text)
  return { family: 'IPv6', value: bytesToBigInt(address.toByteArray()), leadingZeros: false, mapped: address.isIPv4MappedAddress() }
}

/**
 * Parses an IP address as netip.ParseAddr does: IPv4 without leading zeros, IPv6 in any valid
 * notation (IPAddress names are canonical when the apiserver wrote them, but Kubernetes' own tests
 * use names like "2001:0db2::1"). IPv4-mapped IPv6 addresses are IPv6 here, as in netip.
 */
export function parseAddress(text: string): Address | undefined {
  const raw = parseRawAddress(text)
  if (!raw || raw.leadingZeros) return undefined
  return { family: raw.family, value: raw.value }
}

const invalidCIDR = 'must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)'

/**
 * Parses a CIDR with the rules of apimachinery's `IsValidCIDR`
 * (k8s.io/apimachinery/pkg/util/validation/ip.go), with its messages: no leading zeros, no
 * IPv4-mapped IPv6, no bits set beyond the prefix length, and the canonical string form.
 */
export function parseCIDR(text: string): Parsed<Prefix> {
  const slash = text.indexOf('/')
  const addressText = text.slice(0, slash)
  const bitsText = text.slice(slash + 1)
  if (slash < 0 || !/^\d{1,3}$/.test(bitsText)) return { ok: false, error: invalidCIDR }
  const raw = parseRawAddress(addressText)
  const width = raw ? familyWidth(raw.family) : 0
  const bits = Number(bitsText)
  if (!raw || bits > width) return { ok: false, error: invalidCIDR }
  if (raw.leadingZeros || (bitsText.length > 1 && bitsText.startsWith('0'))) {
    return { ok: false, error: 'must not have leading 0s in IP or prefix length' }
  }
  if (raw.mapped) return { ok: false, error: 'must not have an IPv4-mapped IPv6 address' }
  const hostMask = (1n << BigInt(width - bits)) - 1n
  if ((raw.value & hostMask) !== 0n) return { ok: false, error: 'must not have bits set beyond the prefix length' }
  const canonical = `${formatAddress(raw.family, raw.value)}/${bits}`
  if (canonical !== text) return { ok: false, error: `must be in canonical form ("${canonical}")` }
  return { ok: true, value: { family: raw.family, bits, first: raw.value, last: raw.value | hostMask, text } }
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

/** How many addresses the prefix can allocate (see allocatableRange); 0 for an IPv4 /31 or /32. */
export function allocatableSize(prefix: Prefix): bigint {
  const range = allocatableRange(prefix)
  return range.last >= range.first ? range.last - range.first + 1n : 0n
}
