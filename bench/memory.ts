// Heap held by a cache of N IPAddresses: run with --expose-gc in a fresh process (bench/run.ts does).
// The objects are built as the apiserver sends them and projected page by page, as the reflector does.

import { ClusterState, StringPool, toIPAddressRecord } from '../src/policy/state.ts'
import { ipAddressObject } from './fixtures.ts'

const count = Number(process.argv[2] ?? 100_000)
const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error('run with node --expose-gc')

gc()
const before = process.memoryUsage().heapUsed
const state = new ClusterState()
const pool = new StringPool()
const records = []
const bigRangeFirst = (172n << 24n) | (16n << 16n)
for (let page = 0; page < count; page += 500) {
  for (let i = page; i < Math.min(count, page + 500); i++) {
    const record = toIPAddressRecord(ipAddressObject(bigRangeFirst + 1n + BigInt(i), i), pool)
    if (record) records.push(record)
  }
}
state.replaceIPAddresses(records)
records.length = 0
gc()
const after = process.memoryUsage().heapUsed
process.stdout.write(JSON.stringify({ count: state.ipAddressCount, heapBytes: after - before, rss: process.memoryUsage().rss }) + '\n')
