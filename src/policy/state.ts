// An in-memory model of the cluster's ServiceCIDRs and IPAddresses: what the webhook's watches keep
// current, and what the command line builds from files. Pure: callers pass time in; nothing here
// reads a clock or does I/O.

import { familyWidth, parseAddress, parseCIDR, type Family, type Prefix } from './ip.ts'
import {
  managedByAllocator,
  type AddressRange,
  type ClusterView,
  type IPAddressRecord,
  type ParentRef,
  type PlacedCIDR,
  type ServiceCIDRRecord,
} from './types.ts'

/** The fields of a ServiceCIDR or IPAddress object this model reads; any API version. */
export interface ObjectLike {
  readonly metadata?: {
    readonly name?: string | undefined
    readonly labels?: Readonly<Record<string, string>> | undefined
    readonly deletionTimestamp?: unknown
  } | undefined
  readonly spec?: {
    readonly cidrs?: readonly string[] | undefined
    readonly parentRef?: Partial<ParentRef> | undefined
  } | undefined
}

export const familyLabel = 'ipaddress.kubernetes.io/ip-family'
export const managedByLabel = 'ipaddress.kubernetes.io/managed-by'

export function toServiceCIDRRecord(object: ObjectLike): ServiceCIDRRecord | undefined {
  const name = object.metadata?.name
  if (name === undefined) return undefined
  const cidrs: Prefix[] = []
  const invalid: string[] = []
  for (const text of object.spec?.cidrs ?? []) {
    const parsed = parseCIDR(text)
    if (parsed.ok) cidrs.push(parsed.value)
    else invalid.push(text)
  }
  const deletionTimestamp = object.metadata?.deletionTimestamp
  return { name, cidrs, invalid, deleting: deletionTimestamp !== undefined && deletionTimestamp !== null }
}

/** The invalid texts of a record that has none: one frozen array for all of them. */
const noTexts: readonly string[] = Object.freeze([])

/**
 * The record of a ServiceCIDR a request names, as toServiceCIDRRecord reads one (never deleting),
 * for the review that holds it: the reviewer's reservation, a DELETE's oldObject, the shared
 * Lease's ranges. Built from literals of its own, not toServiceCIDRRecord's: V8 decides for each
 * literal in the source whether what it creates starts in the old generation, from how much of it
 * survived a collection (allocation-site pretenuring). A cache that loads many ServiceCIDRs at
 * once (the bench's 1,001) makes toServiceCIDRRecord's literals old; a review's record made there
 * was then allocated old, and kept its young parts alive until the next full collection: 190 bytes
 * promoted a review and a mark-compact about every second under load (docs/benchmarks.md,
 * "Twenty-second pass").
 */
export function requestedServiceCIDR(name: string, texts: readonly string[]): ServiceCIDRRecord {
  // Sized first and cut to the CIDRs that parse, as pendingServiceCIDRs below, and no array for
  // none invalid (the usual request): arrays grown by push from empty take room for 17 items.
  const cidrs = new Array<Prefix>(texts.length)
  let valid = 0
  let invalid: string[] | undefined
  for (const text of texts) {
    const parsed = parseCIDR(text)
    if (parsed.ok) cidrs[valid++] = parsed.value
    else (invalid ??= []).push(text)
  }
  cidrs.length = valid
  return { name, cidrs, invalid: invalid ?? noTexts, deleting: false }
}

/**
 * Keeps one copy of strings that many records repeat (namespaces, groups, label values): 100,000
 * IPAddresses parsed from JSON otherwise hold 100,000 copies of "default".
 */
export class StringPool {
  private readonly strings = new Map<string, string>()
  private readonly limit: number

  constructor(limit = 10_000) {
    this.limit = limit
  }

  get(text: string): string {
    const known = this.strings.get(text)
    if (known !== undefined) return known
    if (this.strings.size < this.limit) this.strings.set(text, text)
    return text
  }
}

const noPool = { get: (text: string): string => text }

export function toIPAddressRecord(object: ObjectLike, pool: Pick<StringPool, 'get'> = noPool): IPAddressRecord | undefined {
  const name = object.metadata?.name
  const address = name === undefined ? undefined : parseAddress(name)
  if (name === undefined || address === undefined) return undefined
  const labels = object.metadata?.labels ?? {}
  const parent = object.spec?.parentRef
  const label = labels[familyLabel]
  return {
    name,
    family: address.family,
    value: address.value,
    familyLabel: label === undefined ? undefined : pool.get(label),
    managed: labels[managedByLabel] === managedByAllocator,
    parentRef: parent === undefined
      ? undefined
      : {
          group: pool.get(parent.group ?? ''),
          resource: pool.get(parent.resource ?? ''),
          namespace: pool.get(parent.namespace ?? ''),
          name: parent.name ?? '',
        },
  }
}

/**
 * Whether canDeleteCIDR would list this IPAddress while checking a CIDR of its own family: it
 * selects on the labels managed-by: ipallocator.k8s.io and ip-family (the family of the CIDR it checks).
 */
export const allocatorManaged = (record: IPAddressRecord): boolean =>
  record.managed && record.familyLabel === record.family

/**
 * An allocator-managed IPAddress labelled with the other family. The allocator never writes one;
 * a hand-made one is listed by canDeleteCIDR while it checks a CIDR of the family the label names
 * (see ClusterView.mislabelledAddresses).
 */
export const mislabelled = (record: IPAddressRecord): boolean =>
  record.managed && record.familyLabel !== record.family && (record.familyLabel === 'IPv4' || record.familyLabel === 'IPv6')

/** Allocator-managed IPAddresses of one family, kept sorted by address for range queries. */
class AddressIndex {
  private readonly values: bigint[] = []
  private readonly records: IPAddressRecord[] = []

  /** First index whose value is >= value. */
  private lowerBound(value: bigint, from = 0, to = this.values.length): number {
    let lo = from
    let hi = to
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if ((this.values[mid] as bigint) < value) lo = mid + 1
      else hi = mid
    }
    return lo
  }

  insert(record: IPAddressRecord): void {
    const at = this.lowerBound(record.value)
    this.values.splice(at, 0, record.value)
    this.records.splice(at, 0, record)
  }

  remove(record: IPAddressRecord): void {
    for (let at = this.lowerBound(record.value); at < this.values.length && this.values[at] === record.value; at++) {
      if (this.records[at] === record) {
        this.values.splice(at, 1)
        this.records.splice(at, 1)
        return
      }
    }
  }

  /** Replaces the contents at once: one sort instead of n sorted inserts. */
  load(records: readonly IPAddressRecord[]): void {
    const sorted = [...records].sort((a, b) => (a.value < b.value ? -1 : a.value > b.value ? 1 : 0))
    this.values.length = 0
    this.records.length = 0
    for (const record of sorted) {
      this.records.push(record)
      this.values.push(record.value)
    }
  }

  between(first: bigint, last: bigint): AddressRange {
    const start = this.lowerBound(first)
    const end = last < first ? start : this.lowerBound(last + 1n, start)
    const { records } = this
    return {
      length: end - start,
      at: (index) => {
        if (index < 0 || index >= end - start) throw new RangeError(`address index ${index} outside 0..${end - start - 1}`)
        return records[start + index] as IPAddressRecord
      },
      countBetween: (from, to) => {
        if (to < from) return 0
        const lo = this.lowerBound(from, start, end)
        return this.lowerBound(to + 1n, lo, end) - lo
      },
    }
  }
}

const compareCIDRs = (a: PlacedCIDR, b: PlacedCIDR): number =>
  a.prefix.first < b.prefix.first ? -1 : a.prefix.first > b.prefix.first ? 1 : a.prefix.bits - b.prefix.bits

/**
 * The CIDRs of the ServiceCIDRs of one family. CIDR blocks either nest or are disjoint, so the ones
 * overlapping a prefix are those inside it (a range of the list sorted by first address) and those
 * containing it (at most one block per shorter prefix length, found by key). Overlap checks then
 * cost O(log n) plus what they find, not a scan of every ServiceCIDR.
 */
class CIDRIndex {
  private readonly sorted: PlacedCIDR[] = []
  private readonly byBlock = new Map<string, PlacedCIDR[]>()
  /** How many entries have each prefix length; only lengths present are probed. */
  private readonly lengths = new Map<number, number>()

  private static key(first: bigint, bits: number): string {
    return `${bits}/${first}`
  }

  private lowerBound(first: bigint): number {
    let lo = 0
    let hi = this.sorted.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if ((this.sorted[mid] as PlacedCIDR).prefix.first < first) lo = mid + 1
      else hi = mid
    }
    return lo
  }

  private index(entry: PlacedCIDR): void {
    const key = CIDRIndex.key(entry.prefix.first, entry.prefix.bits)
    const block = this.byBlock.get(key)
    if (block === undefined) this.byBlock.set(key, [entry])
    else block.push(entry)
    this.lengths.set(entry.prefix.bits, (this.lengths.get(entry.prefix.bits) ?? 0) + 1)
  }

  add(entry: PlacedCIDR): void {
    let at = this.lowerBound(entry.prefix.first)
    while (at < this.sorted.length && compareCIDRs(this.sorted[at] as PlacedCIDR, entry) < 0) at++
    this.sorted.splice(at, 0, entry)
    this.index(entry)
  }

  remove(entry: PlacedCIDR): void {
    const at = this.sorted.indexOf(entry, this.lowerBound(entry.prefix.first))
    if (at < 0) return
    this.sorted.splice(at, 1)
    const key = CIDRIndex.key(entry.prefix.first, entry.prefix.bits)
    const block = (this.byBlock.get(key) ?? []).filter((other) => other !== entry)
    if (block.length === 0) this.byBlock.delete(key)
    else this.byBlock.set(key, block)
    const count = (this.lengths.get(entry.prefix.bits) ?? 1) - 1
    if (count === 0) this.lengths.delete(entry.prefix.bits)
    else this.lengths.set(entry.prefix.bits, count)
  }

  load(entries: readonly PlacedCIDR[]): void {
    this.sorted.splice(0, this.sorted.length, ...[...entries].sort(compareCIDRs))
    this.byBlock.clear()
    this.lengths.clear()
    for (const entry of this.sorted) this.index(entry)
  }

  all(): readonly PlacedCIDR[] {
    return this.sorted
  }

  overlapping(prefix: Prefix): PlacedCIDR[] {
    const found: PlacedCIDR[] = []
    const width = familyWidth(prefix.family)
    for (const bits of this.lengths.keys()) {
      if (bits >= prefix.bits) continue
      const hostBits = BigInt(width - bits)
      const block = this.byBlock.get(CIDRIndex.key((prefix.first >> hostBits) << hostBits, bits))
      if (block !== undefined) found.push(...block)
    }
    for (let at = this.lowerBound(prefix.first); at < this.sorted.length; at++) {
      const entry = this.sorted[at] as PlacedCIDR
      if (entry.prefix.first > prefix.last) break
      if (entry.prefix.bits >= prefix.bits) found.push(entry)
    }
    return found
  }
}

interface Pending {
  readonly record: ServiceCIDRRecord
  readonly expiresAt: number
}

/** A ServiceCIDR's CIDRs as written, which is all the checks below read. */
interface WrittenCIDRs {
  readonly cidrs: readonly { readonly text: string }[]
}

/** Whether `record` holds a CIDR written `text`. Loops, not closures: this runs for every admitted CREATE. */
function holdsText(record: WrittenCIDRs, text: string): boolean {
  for (const prefix of record.cidrs) {
    if (prefix.text === text) return true
  }
  return false
}

/**
 * Whether `record` holds every one of `cidrs` (as written): a reservation of those CIDRs, is it
 * shown by the ServiceCIDR, or already pending?
 */
export function holdsCIDRs(record: WrittenCIDRs, cidrs: readonly string[]): boolean {
  for (const text of cidrs) {
    if (!holdsText(record, text)) return false
  }
  return true
}

/** Whether `record` holds every CIDR of `other`. */
function covers(record: WrittenCIDRs, other: WrittenCIDRs): boolean {
  for (const prefix of other.cidrs) {
    if (!holdsText(record, prefix.text)) return false
  }
  return true
}

/** Whether two records of one name hold the same CIDRs, in any order. */
function sameCIDRs(a: ServiceCIDRRecord, b: ServiceCIDRRecord): boolean {
  return a.cidrs.length === b.cidrs.length && covers(a, b)
}

export class ClusterState implements ClusterView {
  private readonly cidrs = new Map<string, ServiceCIDRRecord>()
  private readonly cidrIndex: Record<Family, CIDRIndex> = { IPv4: new CIDRIndex(), IPv6: new CIDRIndex() }
  /** The index entries of each ServiceCIDR, to take them out again on update or delete. */
  private readonly placed = new Map<string, PlacedCIDR[]>()
  private readonly addresses = new Map<string, IPAddressRecord>()
  private readonly index: Record<Family, AddressIndex> = { IPv4: new AddressIndex(), IPv6: new AddressIndex() }
  private readonly otherFamilyLabel = new Map<string, IPAddressRecord>()
  /** The IPAddresses `index` leaves out, by the family of their address: they occupy it all the same. */
  private readonly unmanaged: Record<Family, AddressIndex> = { IPv4: new AddressIndex(), IPv6: new AddressIndex() }
  /** The latest reservation of each name. */
  private readonly pending = new Map<string, Pending>()
  /**
   * Earlier reservations of a name with other CIDRs, kept beside the latest (reserve): rare, so the
   * common case costs what one reservation a name did. A name is here only while it is in `pending`.
   */
  private readonly beside = new Map<string, Pending[]>()
  private serviceCIDRRevision = 0

  get revision(): number {
    return this.serviceCIDRRevision
  }

  get serviceCIDRCount(): number {
    return this.cidrs.size
  }

  get ipAddressCount(): number {
    return this.addresses.size
  }

  serviceCIDRs(): Iterable<ServiceCIDRRecord> {
    return this.cidrs.values()
  }

  serviceCIDR(name: string): ServiceCIDRRecord | undefined {
    return this.cidrs.get(name)
  }

  pendingServiceCIDRs(): readonly ServiceCIDRRecord[] {
    // A loop: Array.from with a map function took ~250 ns a call against ~25 (one entry), and the
    // overlap rule calls this for every CREATE.
    // Sized first: an array grown from empty by push starts with room for 16, for one entry.
    const records = new Array<ServiceCIDRRecord>(this.pending.size)
    let at = 0
    for (const entry of this.pending.values()) records[at++] = entry.record
    if (this.beside.size > 0) {
      for (const entries of this.beside.values()) {
        for (const entry of entries) records.push(entry.record)
      }
    }
    return records
  }

  pendingServiceCIDRHolding(name: string, cidrs: readonly string[]): ServiceCIDRRecord | undefined {
    const latest = this.pending.get(name)
    if (latest === undefined) return undefined
    if (holdsCIDRs(latest.record, cidrs)) return latest.record
    for (const entry of this.beside.get(name) ?? []) {
      if (holdsCIDRs(entry.record, cidrs)) return entry.record
    }
    return undefined
  }

  /**
   * The watch shows `record`: the reservations of its name whose CIDRs it holds have done their job
   * (the ServiceCIDR itself counts now). Others of that name wait for their expiry: an UPDATE adding
   * a family that is not stored yet, or a CREATE of the name with other CIDRs, which can no longer
   * be stored but costs at most a refusal until then.
   */
  private endShown(record: ServiceCIDRRecord): void {
    const latest = this.pending.get(record.name)
    if (latest === undefined) return
    const others = this.beside.get(record.name)
    if (others !== undefined) {
      const left = others.filter((entry) => !covers(record, entry.record))
      if (left.length === 0) this.beside.delete(record.name)
      else this.beside.set(record.name, left)
    }
    if (covers(record, latest.record)) this.promote(record.name)
  }

  /** The latest reservation of a name is gone: the last of the others, if any, takes its place. */
  private promote(name: string): void {
    const others = this.beside.get(name)
    const next = others?.pop()
    if (next === undefined) this.pending.delete(name)
    else this.pending.set(name, next)
    if (others?.length === 0) this.beside.delete(name)
  }

  cidrsOverlapping(prefix: Prefix): readonly PlacedCIDR[] {
    return this.cidrIndex[prefix.family].overlapping(prefix)
  }

  cidrsInOrder(family: Family): readonly PlacedCIDR[] {
    return this.cidrIndex[family].all()
  }

  addressesBetween(family: Family, first: bigint, last: bigint): AddressRange {
    return this.index[family].between(first, last)
  }

  mislabelledAddresses(): readonly IPAddressRecord[] {
    return [...this.otherFamilyLabel.values()]
  }

  occupiedBetween(family: Family, first: bigint, last: bigint): number {
    return this.index[family].between(first, last).length + this.unmanaged[family].between(first, last).length
  }

  ipAddresses(): Iterable<IPAddressRecord> {
    return this.addresses.values()
  }

  private static place(record: ServiceCIDRRecord): PlacedCIDR[] {
    return record.cidrs.map((prefix) => ({ record, prefix }))
  }

  upsertServiceCIDR(record: ServiceCIDRRecord): void {
    this.removeServiceCIDR(record.name)
    this.cidrs.set(record.name, record)
    const entries = ClusterState.place(record)
    this.placed.set(record.name, entries)
    for (const entry of entries) this.cidrIndex[entry.prefix.family].add(entry)
    // The watch has caught up with what this process admitted.
    this.endShown(record)
  }

  removeServiceCIDR(name: string): void {
    this.serviceCIDRRevision++
    for (const entry of this.placed.get(name) ?? []) this.cidrIndex[entry.prefix.family].remove(entry)
    this.placed.delete(name)
    this.cidrs.delete(name)
  }

  replaceServiceCIDRs(records: Iterable<ServiceCIDRRecord>): void {
    this.serviceCIDRRevision++
    this.cidrs.clear()
    this.placed.clear()
    for (const record of records) {
      this.cidrs.set(record.name, record)
      this.endShown(record)
    }
    const byFamily: Record<Family, PlacedCIDR[]> = { IPv4: [], IPv6: [] }
    for (const record of this.cidrs.values()) {
      const entries = ClusterState.place(record)
      this.placed.set(record.name, entries)
      for (const entry of entries) byFamily[entry.prefix.family].push(entry)
    }
    this.cidrIndex.IPv4.load(byFamily.IPv4)
    this.cidrIndex.IPv6.load(byFamily.IPv6)
  }

  upsertIPAddress(record: IPAddressRecord): void {
    this.removeIPAddress(record.name)
    this.addresses.set(record.name, record)
    if (allocatorManaged(record)) {
      this.index[record.family].insert(record)
      return
    }
    this.unmanaged[record.family].insert(record)
    if (mislabelled(record)) this.otherFamilyLabel.set(record.name, record)
  }

  removeIPAddress(name: string): void {
    const old = this.addresses.get(name)
    if (old === undefined) return
    this.addresses.delete(name)
    if (allocatorManaged(old)) this.index[old.family].remove(old)
    else this.unmanaged[old.family].remove(old)
    this.otherFamilyLabel.delete(name)
  }

  replaceIPAddresses(records: Iterable<IPAddressRecord>): void {
    this.addresses.clear()
    this.otherFamilyLabel.clear()
    for (const record of records) this.addresses.set(record.name, record)
    const byFamily: Record<Family, IPAddressRecord[]> = { IPv4: [], IPv6: [] }
    const others: Record<Family, IPAddressRecord[]> = { IPv4: [], IPv6: [] }
    for (const record of this.addresses.values()) {
      if (allocatorManaged(record)) {
        byFamily[record.family].push(record)
        continue
      }
      others[record.family].push(record)
      if (mislabelled(record)) this.otherFamilyLabel.set(record.name, record)
    }
    this.index.IPv4.load(byFamily.IPv4)
    this.index.IPv6.load(byFamily.IPv6)
    this.unmanaged.IPv4.load(others.IPv4)
    this.unmanaged.IPv6.load(others.IPv6)
  }

  /**
   * Records a CREATE (or an UPDATE adding a family) this process admitted, until the watch shows the
   * ServiceCIDR with those CIDRs or `expiresAt` passes. One of the same name and CIDRs is replaced
   * (the same request retried); one of the same name and other CIDRs is kept beside it: either
   * request's object may be the one kube-apiserver stores, and until the watch shows which, both
   * ranges count.
   */
  reserve(record: ServiceCIDRRecord, expiresAt: number): void {
    const latest = this.pending.get(record.name)
    if (latest !== undefined && !sameCIDRs(latest.record, record)) {
      const others = (this.beside.get(record.name) ?? []).filter((entry) => !sameCIDRs(entry.record, record))
      others.push(latest)
      this.beside.set(record.name, others)
    }
    this.pending.set(record.name, { record, expiresAt })
  }

  /** Forgets a reservation (its admission was withdrawn), unless a newer one replaced it. */
  release(record: ServiceCIDRRecord): void {
    if (this.pending.get(record.name)?.record === record) {
      this.promote(record.name)
      return
    }
    const others = this.beside.get(record.name)
    if (others === undefined) return
    const left = others.filter((entry) => entry.record !== record)
    if (left.length === 0) this.beside.delete(record.name)
    else this.beside.set(record.name, left)
  }

  /** Drops reservations that expired by `now`; returns how many remain. */
  expireReservations(now: number): number {
    let remaining = 0
    if (this.beside.size > 0) {
      for (const [name, others] of this.beside) {
        const left = others.filter((entry) => entry.expiresAt > now)
        if (left.length === 0) this.beside.delete(name)
        else this.beside.set(name, left)
        remaining += left.length
      }
    }
    for (const [name, entry] of this.pending) {
      if (entry.expiresAt > now) continue
      // What is left beside it has not expired: it takes its place (set in place, not visited again).
      this.promote(name)
      if (this.pending.has(name)) remaining--
    }
    return remaining + this.pending.size
  }
}
