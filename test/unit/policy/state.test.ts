import t from 'tap'
import type { Family } from '../../../src/policy/ip.ts'
import { allocatorManaged, ClusterState, requestedServiceCIDR, toIPAddressRecord, toServiceCIDRRecord } from '../../../src/policy/state.ts'
import type { AddressRange, IPAddressRecord } from '../../../src/policy/types.ts'
import { ipAddress, serviceCIDR } from '../../support/fixtures.ts'

const namesOf = (range: AddressRange): string[] => Array.from({ length: range.length }, (_, i) => range.at(i).name)
const v4 = (text: string): bigint => {
  const [a = 0, b = 0, c = 0, d = 0] = text.split('.').map(Number)
  return BigInt(((a * 256 + b) * 256 + c) * 256 + d)
}

void t.test('toServiceCIDRRecord', (t) => {
  t.equal(toServiceCIDRRecord({}), undefined, 'no name, no record')
  t.equal(toServiceCIDRRecord({ metadata: {} }), undefined, 'no name in metadata')
  const record = toServiceCIDRRecord({ metadata: { name: 'extra', deletionTimestamp: '2025-01-01T00:00:00Z' }, spec: { cidrs: ['10.0.0.0/24', 'FD00::/64'] } })
  t.same(record && { ...record, cidrs: record.cidrs.map((cidr) => cidr.text) }, { name: 'extra', cidrs: ['10.0.0.0/24'], invalid: ['FD00::/64'], deleting: true }, 'invalid CIDRs are kept aside; deletionTimestamp means Terminating')
  t.equal(toServiceCIDRRecord({ metadata: { name: 'a', deletionTimestamp: null } })?.deleting, false, 'a null deletionTimestamp is not set')
  t.same(toServiceCIDRRecord({ metadata: { name: 'a' } }), { name: 'a', cidrs: [], invalid: [], deleting: false }, 'no spec')
  t.end()
})

void t.test('requestedServiceCIDR reads the CIDRs as toServiceCIDRRecord does', (t) => {
  for (const cidrs of [[], ['10.0.0.0/24'], ['10.0.0.0/24', 'FD00::/64'], ['fd00::/64', '10.0.0.0/24'], ['10.0.0.1/24', '', '010.0.0.0/8']]) {
    t.same(requestedServiceCIDR('extra', cidrs), toServiceCIDRRecord({ metadata: { name: 'extra' }, spec: { cidrs } }), JSON.stringify(cidrs))
  }
  t.end()
})

void t.test('toIPAddressRecord', (t) => {
  t.equal(toIPAddressRecord({ spec: {} }), undefined, 'no name')
  t.equal(toIPAddressRecord({ metadata: { name: '010.0.0.1' } }), undefined, 'a name that is not an address')
  t.same(toIPAddressRecord({
    metadata: { name: '10.96.0.10', labels: { 'ipaddress.kubernetes.io/ip-family': 'IPv4', 'ipaddress.kubernetes.io/managed-by': 'ipallocator.k8s.io' } },
    spec: { parentRef: { group: '', resource: 'services', namespace: 'default', name: 'web' } },
  }), {
    name: '10.96.0.10',
    family: 'IPv4',
    value: v4('10.96.0.10'),
    familyLabel: 'IPv4',
    managed: true,
    parentRef: { group: '', resource: 'services', namespace: 'default', name: 'web' },
  }, 'an address the allocator wrote')
  t.same(toIPAddressRecord({ metadata: { name: '2001:0db8::1' }, spec: { parentRef: {} } }), {
    name: '2001:0db8::1',
    family: 'IPv6',
    value: (0x20010db8n << 96n) | 1n,
    familyLabel: undefined,
    managed: false,
    parentRef: { group: '', resource: '', namespace: '', name: '' },
  }, 'no labels, an empty parentRef')
  t.equal(toIPAddressRecord({ metadata: { name: '10.0.0.1', labels: { 'ipaddress.kubernetes.io/managed-by': 'other' } } })?.managed, false, 'managed by someone else')
  // Namespaces and groups are interned up to 10,000 distinct strings; past that they are kept as given.
  const many = Array.from({ length: 10_050 }, (_, i) => toIPAddressRecord({ metadata: { name: '10.0.0.1' }, spec: { parentRef: { namespace: `ns-${i}`, name: 'svc' } } }))
  t.same(many.map((record) => record?.parentRef?.namespace).slice(-2), ['ns-10048', 'ns-10049'], 'past the interning limit')
  t.end()
})

void t.test('allocatorManaged: the labels canDeleteCIDR selects on', (t) => {
  const cases = [
    { name: 'written by the allocator', record: ipAddress('10.0.0.1'), want: true },
    { name: 'IPv6 written by the allocator', record: ipAddress('fd00::1'), want: true },
    { name: 'no managed-by label', record: ipAddress('10.0.0.1', { managedBy: undefined }), want: false },
    { name: 'another manager', record: ipAddress('10.0.0.1', { managedBy: 'my-controller' }), want: false },
    { name: 'no family label', record: ipAddress('10.0.0.1', { family: undefined }), want: false },
    { name: 'family label of the other family', record: ipAddress('10.0.0.1', { family: 'IPv6' }), want: false },
    { name: 'family label in another spelling', record: ipAddress('10.0.0.1', { family: 'ipv4' }), want: false },
  ]
  for (const tc of cases) t.equal(allocatorManaged(tc.record), tc.want, tc.name)
  t.end()
})

void t.test('addressesBetween', (t) => {
  const state = new ClusterState()
  state.replaceIPAddresses(['10.0.0.9', '10.0.0.1', '10.0.0.5', '10.0.0.3', 'fd00::1', '10.0.0.7'].map((ip) => ipAddress(ip)))
  state.upsertIPAddress(ipAddress('10.0.0.4', { managedBy: undefined }))

  t.same(namesOf(state.addressesBetween('IPv4', 0n, 2n ** 32n - 1n)), ['10.0.0.1', '10.0.0.3', '10.0.0.5', '10.0.0.7', '10.0.0.9'], 'in address order; unmanaged addresses left out')
  t.same(namesOf(state.addressesBetween('IPv4', v4('10.0.0.3'), v4('10.0.0.7'))), ['10.0.0.3', '10.0.0.5', '10.0.0.7'], 'both ends included')
  t.same(namesOf(state.addressesBetween('IPv4', v4('10.0.0.4'), v4('10.0.0.4'))), [], 'nothing between')
  t.same(namesOf(state.addressesBetween('IPv4', v4('10.0.0.7'), v4('10.0.0.3'))), [], 'last before first')
  t.same(namesOf(state.addressesBetween('IPv6', 0n, 2n ** 128n - 1n)), ['fd00::1'], 'families are apart')

  const range = state.addressesBetween('IPv4', v4('10.0.0.2'), v4('10.0.0.8'))
  t.equal(range.length, 3)
  t.throws(() => range.at(3), RangeError, 'past the end')
  t.throws(() => range.at(-1), RangeError, 'before the start')
  t.equal(range.countBetween(v4('10.0.0.4'), v4('10.0.0.9')), 2, 'counts only inside the range it was taken from')
  t.equal(range.countBetween(0n, 2n ** 32n - 1n), 3, 'clamped to the range')
  t.equal(range.countBetween(v4('10.0.0.6'), v4('10.0.0.4')), 0, 'to before from')
  t.equal(state.addressesBetween('IPv4', v4('10.0.0.7'), v4('10.0.0.3')).countBetween(0n, 2n ** 32n - 1n), 0, 'empty range')
  t.end()
})

void t.test('the address index stays sorted through upserts, removals and replacements', (t) => {
  // A pool of names: IPv4, IPv6 and non-canonical spellings of the same IPv6 value (two records
  // with one value), labelled in every way that does and does not make them allocator-managed.
  const pool = [
    ...Array.from({ length: 24 }, (_, i) => `10.0.0.${i * 7}`),
    ...Array.from({ length: 12 }, (_, i) => `fd00::${(i * 5).toString(16)}`),
    ...Array.from({ length: 6 }, (_, i) => `fd00:0::${(i * 5).toString(16)}`),
  ]
  const labellings = [{}, {}, {}, { managedBy: undefined }, { family: undefined }, { family: 'IPv4' }, { family: 'IPv6' }]
  let seed = 11
  const random = (n: number): number => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0
    return (seed >>> 8) % n
  }
  const randomRecord = (): IPAddressRecord => ipAddress(pool[random(pool.length)]!, labellings[random(labellings.length)])

  const state = new ClusterState()
  const naive = new Map<string, IPAddressRecord>()
  const expected = (family: Family, first: bigint, last: bigint): [bigint, string][] =>
    [...naive.values()]
      .filter((record) => allocatorManaged(record) && record.family === family && record.value >= first && record.value <= last)
      .map((record): [bigint, string] => [record.value, record.name])
      .sort(([a, an], [b, bn]) => (a < b ? -1 : a > b ? 1 : an < bn ? -1 : an > bn ? 1 : 0))
  const actual = (range: AddressRange): [bigint, string][] => {
    const entries = Array.from({ length: range.length }, (_, i): [bigint, string] => [range.at(i).value, range.at(i).name])
    for (let i = 1; i < entries.length; i++) {
      if (entries[i - 1]![0] > entries[i]![0]) return [[-1n, 'not sorted']]
    }
    // Records with one value may come in any order; compare them by name.
    return entries.sort(([a, an], [b, bn]) => (a < b ? -1 : a > b ? 1 : an < bn ? -1 : an > bn ? 1 : 0))
  }

  let mismatches = 0
  for (let step = 0; step < 3000; step++) {
    const operation = random(20)
    if (operation < 12) {
      const record = randomRecord()
      state.upsertIPAddress(record)
      naive.set(record.name, record)
    } else if (operation < 19) {
      const name = pool[random(pool.length)]!
      state.removeIPAddress(name)
      naive.delete(name)
    } else {
      const records = Array.from({ length: random(30) }, randomRecord)
      state.replaceIPAddresses(records)
      naive.clear()
      for (const record of records) naive.set(record.name, record)
    }
    const families: [Family, bigint][] = [['IPv4', v4('10.0.0.0')], ['IPv6', 0xfd00n << 112n]]
    for (const [family, base] of families) {
      const first = base + BigInt(random(170))
      const last = first + BigInt(random(100))
      const range = state.addressesBetween(family, first, last)
      const want = expected(family, first, last)
      const from = first + BigInt(random(60))
      const to = from + BigInt(random(60))
      const wantCount = want.filter(([value]) => value >= from && value <= to).length
      if (JSON.stringify(actual(range), (_, value: unknown) => (typeof value === 'bigint' ? value.toString() : value)) !==
        JSON.stringify(want, (_, value: unknown) => (typeof value === 'bigint' ? value.toString() : value)) ||
        range.countBetween(from, to) !== wantCount) {
        mismatches++
      }
      // Every record of the family, whatever its labels, occupies its address.
      const occupied = [...naive.values()].filter((record) => record.family === family && record.value >= first && record.value <= last).length
      if (state.occupiedBetween(family, first, last) !== occupied) mismatches++
    }
    if (state.ipAddressCount !== naive.size) mismatches++
    // Managed, and labelled with the other family: canDeleteCIDR still lists these (see coverage.ts).
    const mislabelled = [...naive.values()].filter((record) => record.managed && record.familyLabel !== undefined && record.familyLabel !== record.family).map((record) => record.name).sort()
    if (JSON.stringify(state.mislabelledAddresses().map((record) => record.name).sort()) !== JSON.stringify(mislabelled)) mismatches++
  }
  t.equal(mismatches, 0, 'every query after every step of 3000 agrees with a filter over a plain map')
  t.same(new Set([...state.ipAddresses()].map((record) => record.name)), new Set(naive.keys()), 'ipAddresses() lists what is held')
  t.end()
})

void t.test('ServiceCIDRs', (t) => {
  const state = new ClusterState()
  state.replaceServiceCIDRs([serviceCIDR('kubernetes', '10.96.0.0/12'), serviceCIDR('extra', '10.112.0.0/16')])
  t.equal(state.serviceCIDRCount, 2)
  t.equal(state.serviceCIDR('extra')?.cidrs[0]?.text, '10.112.0.0/16')
  state.upsertServiceCIDR(serviceCIDR('extra', '10.112.0.0/16', 'fd00::/108'))
  t.equal(state.serviceCIDR('extra')?.cidrs.length, 2, 'upsert replaces')
  state.removeServiceCIDR('kubernetes')
  state.removeServiceCIDR('never-there')
  t.same([...state.serviceCIDRs()].map((record) => record.name), ['extra'])
  state.replaceServiceCIDRs([serviceCIDR('other', '10.0.0.0/24')])
  t.same([...state.serviceCIDRs()].map((record) => record.name), ['other'], 'replace drops what is not listed')
  t.end()
})

void t.test('reservations', (t) => {
  const names = (state: ClusterState): string[] => [...state.pendingServiceCIDRs()].map((record) => record.name).sort()

  const state = new ClusterState()
  state.reserve(serviceCIDR('a', '10.0.0.0/24'), 100)
  state.reserve(serviceCIDR('b', '10.0.1.0/24'), 200)
  state.reserve(serviceCIDR('c', '10.0.2.0/24'), 300)
  t.same(names(state), ['a', 'b', 'c'])
  t.equal(state.pendingServiceCIDRHolding('b', ['10.0.1.0/24'])?.cidrs[0]?.text, '10.0.1.0/24', 'by name and CIDRs')
  t.equal(state.pendingServiceCIDRHolding('b', ['10.0.9.0/24']), undefined, 'not with other CIDRs')
  t.equal(state.pendingServiceCIDRHolding('z', ['10.0.1.0/24']), undefined)
  t.equal(state.serviceCIDRCount, 0, 'a reservation is not a ServiceCIDR')

  t.equal(state.expireReservations(99), 3, 'nothing expired before its time')
  t.equal(state.expireReservations(100), 2, 'expired at its time')
  t.same(names(state), ['b', 'c'])

  state.reserve(serviceCIDR('b', '10.0.1.0/24'), 500)
  t.equal(state.expireReservations(300), 1, 'reserving again moves the expiry')
  t.same(names(state), ['b'])

  state.upsertServiceCIDR(serviceCIDR('b', '10.0.1.0/24'))
  t.same(names(state), [], 'the watch showing the ServiceCIDR drops its reservation')
  t.equal(state.serviceCIDRCount, 1)

  state.reserve(serviceCIDR('d', '10.0.3.0/24'), 1000)
  state.reserve(serviceCIDR('e', '10.0.4.0/24'), 1000)
  state.replaceServiceCIDRs([serviceCIDR('d', '10.0.3.0/24')])
  t.same(names(state), ['e'], 'a relist drops the reservations of the ServiceCIDRs it lists')
  state.removeServiceCIDR('e')
  t.same(names(state), ['e'], 'removing a ServiceCIDR leaves a reservation of that name to expire')
  t.equal(state.expireReservations(1000), 0)

  const first = serviceCIDR('f', '10.0.5.0/24')
  const second = serviceCIDR('f', '10.0.5.0/24')
  state.reserve(first, 2000)
  state.reserve(second, 2000)
  state.release(first)
  t.same(names(state), ['f'], 'releasing a reservation a newer one of the same name replaced leaves the newer one')
  state.release(second)
  t.same(names(state), [], 'releasing the one held drops it')

  // A CREATE retried under the same name with other CIDRs: the first may still be the one stored.
  const tried = serviceCIDR('g', '10.0.6.0/24')
  const retried = serviceCIDR('g', '10.0.7.0/24')
  state.reserve(tried, 3000)
  state.reserve(retried, 4000)
  const named = (name: string): string[] => [...state.pendingServiceCIDRs()].filter((record) => record.name === name).map((record) => record.cidrs[0]?.text ?? '').sort()
  t.same(named('g'), ['10.0.6.0/24', '10.0.7.0/24'], 'both are pending: either may be the one kube-apiserver stores')
  t.equal(state.pendingServiceCIDRHolding('g', ['10.0.6.0/24']), tried)
  t.equal(state.pendingServiceCIDRHolding('g', ['10.0.7.0/24']), retried)
  t.equal(state.expireReservations(3000), 1, 'each expires at its own time')
  t.same(named('g'), ['10.0.7.0/24'])
  state.reserve(tried, 5000)
  t.equal(state.expireReservations(4000), 1, 'the latest expired, the earlier one left')
  t.same(named('g'), ['10.0.6.0/24'])
  state.reserve(retried, 6000)
  state.reserve(serviceCIDR('g', '10.0.8.0/24'), 6000)
  state.reserve(serviceCIDR('g', '10.0.6.0/24'), 7000)
  t.same(named('g'), ['10.0.6.0/24', '10.0.7.0/24', '10.0.8.0/24'], 'three at once, the same CIDRs again replacing its earlier reservation')
  t.equal(state.expireReservations(6000), 1, 'the two expiring at 6000 gone')
  state.release(tried)
  t.same(named('g'), ['10.0.6.0/24'], 'releasing a record that was replaced leaves the one that replaced it')
  state.reserve(tried, 8000)
  state.reserve(retried, 8000)
  state.release(tried)
  t.same(named('g'), ['10.0.7.0/24'], 'releasing one kept beside leaves the latest')
  state.reserve(tried, 8000)
  state.release(tried)
  t.same(named('g'), ['10.0.7.0/24'], 'releasing the latest leaves the other')
  state.reserve(tried, 9000)
  t.same(named('g'), ['10.0.6.0/24', '10.0.7.0/24'])
  state.upsertServiceCIDR(serviceCIDR('g', '10.0.7.0/24'))
  t.same(named('g'), ['10.0.6.0/24'], 'the watch showing one ends it; the other waits for its expiry (it can no longer be stored, and costs at most a refusal until then)')
  t.equal(state.expireReservations(9000), 0)

  // An UPDATE adding a family, reserved while the watch still shows the object without it.
  state.upsertServiceCIDR(serviceCIDR('h', '10.0.9.0/24'))
  const dual = serviceCIDR('h', '10.0.9.0/24', 'fd00::/64')
  state.reserve(dual, 10_000)
  state.upsertServiceCIDR(serviceCIDR('h', '10.0.9.0/24'))
  t.same([...state.pendingServiceCIDRs()], [dual], 'an event of the object as it was does not end the reservation of its new family')
  state.replaceServiceCIDRs([serviceCIDR('h', '10.0.9.0/24')])
  t.same([...state.pendingServiceCIDRs()], [dual], 'nor does a relist')
  state.upsertServiceCIDR(serviceCIDR('h', '10.0.9.0/24', 'fd00::/64'))
  t.same(names(state), [], 'the object with both families does')
  t.end()
})

void t.test('revision: changes with the ServiceCIDRs held, not with reservations or IPAddresses', (t) => {
  const state = new ClusterState()
  const seen: number[] = [state.revision]
  const step = (change: () => void): boolean => {
    change()
    const changed = state.revision !== seen[seen.length - 1]
    seen.push(state.revision)
    return changed
  }
  t.ok(step(() => { state.replaceServiceCIDRs([serviceCIDR('kubernetes', '10.96.0.0/28')]) }), 'replaced')
  t.ok(step(() => { state.upsertServiceCIDR(serviceCIDR('a', '10.1.0.0/24')) }), 'added')
  t.ok(step(() => { state.upsertServiceCIDR(serviceCIDR('a', '10.1.0.0/24', 'fd00::/108')) }), 'updated')
  t.ok(step(() => { state.removeServiceCIDR('a') }), 'removed')
  t.notOk(step(() => { state.reserve(serviceCIDR('b', '10.2.0.0/24'), Number.MAX_SAFE_INTEGER) }), 'a reservation')
  t.notOk(step(() => { state.release(serviceCIDR('b', '10.2.0.0/24')) }), 'a release')
  t.notOk(step(() => { state.upsertIPAddress(ipAddress('10.96.0.1')) }), 'an IPAddress')
  t.equal(new Set(seen).size, 5, 'never back to an earlier revision')
  t.end()
})
