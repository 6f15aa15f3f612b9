// IPv4 arithmetic for checking the cluster's answers, kept apart from src/policy/ip.ts on purpose:
// the suite should not prove the webhook right with the webhook's own code.

export interface IPv4Range {
  readonly text: string
  readonly network: number
  readonly bits: number
  readonly size: number
}

export function ipv4ToNumber(ip: string): number | undefined {
  const parts = ip.split('.')
  if (parts.length !== 4 || parts.some((part) => !/^\d{1,3}$/.test(part) || Number(part) > 255)) return undefined
  return parts.reduce((value, part) => value * 256 + Number(part), 0)
}

export function parseIPv4CIDR(text: string): IPv4Range | undefined {
  const [address, length] = text.split('/')
  const network = address === undefined ? undefined : ipv4ToNumber(address)
  const bits = Number(length)
  if (network === undefined || !Number.isInteger(bits) || bits < 0 || bits > 32) return undefined
  return { text, network, bits, size: 2 ** (32 - bits) }
}

/** Inside the range and allocatable: neither its network nor its broadcast address. */
export function allocatableIn(range: IPv4Range, ip: string): boolean {
  const value = ipv4ToNumber(ip)
  return value !== undefined && value > range.network && value < range.network + range.size - 1
}

export function inRange(range: IPv4Range, ip: string): boolean {
  const value = ipv4ToNumber(ip)
  return value !== undefined && value >= range.network && value < range.network + range.size
}

export function overlapping(a: IPv4Range, b: IPv4Range): boolean {
  return a.network < b.network + b.size && b.network < a.network + a.size
}
