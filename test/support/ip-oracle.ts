// CIDRs as ipaddr.js reads them: an independent check of src/policy/ip.ts for the property tests.

import ipaddr from 'ipaddr.js'

export interface OracleRange { readonly v6: boolean, readonly first: bigint, readonly last: bigint, readonly bits: number }

const toBig = (bytes: number[]): bigint => bytes.reduce((value, byte) => (value << 8n) | BigInt(byte), 0n)

/**
 * The range of a CIDR written exactly as Kubernetes writes it (apimachinery's IsValidCIDR: the
 * network address, no host bits, no leading zeros, lower-case RFC 5952 IPv6, no IPv4-mapped
 * IPv6), or undefined. "Written exactly" is: ipaddr.js's own rendering of its parse is the text.
 */
export function canonicalRange(text: string): OracleRange | undefined {
  let parsed: [ipaddr.IPv4 | ipaddr.IPv6, number]
  try {
    parsed = ipaddr.parseCIDR(text)
  } catch {
    return undefined
  }
  const [address, bits] = parsed
  const v6 = address.kind() === 'ipv6'
  if (v6 && (address as ipaddr.IPv6).isIPv4MappedAddress()) return undefined
  const network = v6 ? ipaddr.IPv6.networkAddressFromCIDR(text) : ipaddr.IPv4.networkAddressFromCIDR(text)
  const written = v6 ? ipaddr.IPv6.networkAddressFromCIDR(text).toRFC5952String() : network.toString()
  if (`${written}/${bits}` !== text) return undefined
  const broadcast = v6 ? ipaddr.IPv6.broadcastAddressFromCIDR(text) : ipaddr.IPv4.broadcastAddressFromCIDR(text)
  return { v6, first: toBig(network.toByteArray()), last: toBig(broadcast.toByteArray()), bits }
}
