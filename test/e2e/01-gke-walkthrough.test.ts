// The GKE walkthrough of extra Service ranges, against a real kube-apiserver: the small default
// range fills up, Service creation fails with "range is full", a ServiceCIDR from the policy's block
// is admitted, and once kube-controller-manager marks it Ready new Services get addresses from it.
//
// Ranges: 34.118.224.0/20 (the whole allowed block), released at the end.

import t from 'tap'
import { apiFailure, failure, type Cluster } from './lib/kube.ts'
import { allocatableIn, inRange, parseIPv4CIDR, type IPv4Range } from './lib/ipv4.ts'
import { begin, finish } from './lib/setup.ts'
import { Fatal, poll } from './lib/wait.ts'

const context = await begin(t, import.meta.url, 'walkthrough')
const { cluster, file, spec } = context
const extraName = 'e2e-walkthrough'
const extraRange = '34.118.224.0/20'
/** Beyond this many free addresses, filling the default range is not a test but a load run. */
const maxFill = 64

async function defaultRange(cluster: Cluster): Promise<IPv4Range> {
  const kubernetes = await cluster.getServiceCIDR('kubernetes')
  const text = kubernetes?.spec?.cidrs?.map(parseIPv4CIDR).find((range) => range !== undefined)
  if (text === undefined) throw new Error('the default ServiceCIDR "kubernetes" has no IPv4 range')
  return text
}

/** A Service that has to come from a range that just became Ready: the apiserver's allocator learns
 * of it from its own informer, so "range is full" may still come back for a moment. */
async function serviceFromNewRange(name: string): Promise<string> {
  return poll(`Service ${name} to get a ClusterIP`, async () => {
    try {
      const service = await cluster.createService(spec, name)
      return service.spec?.clusterIP
    } catch (error) {
      const message = apiFailure(error)?.status.message ?? String(error)
      if (/range is full/.test(message)) throw new Error(message, { cause: error })
      throw new Fatal(message, { cause: error })
    }
  }, { timeoutMs: 15_000, intervalMs: 250 })
}

let fill: string[] = []
let range: IPv4Range | undefined

await file.spec('the default range fills up, then Service creation fails with "range is full"', async (t) => {
  range = await defaultRange(cluster)
  // Another ServiceCIDR would give Services addresses once the default range is full, and "range is
  // full" would never come: say which, rather than that a Service was admitted.
  const others = (await cluster.net.listServiceCIDR()).items.map((cidr) => cidr.metadata?.name ?? '').filter((name) => name !== 'kubernetes')
  if (others.length > 0) {
    t.fail(`ServiceCIDRs other than "kubernetes" exist (${others.join(', ')}): the default range cannot fill while they give addresses; the walkthrough needs a cluster without them`)
    return
  }
  const usable = range.size - 2
  const used = (await cluster.net.listIPAddress()).items.filter((address) => allocatableIn(range!, address.metadata?.name ?? '')).length
  const free = usable - used
  t.comment(`default range ${range.text}: ${usable} usable, ${used} held by IPAddresses already, ${free} free`)
  if (free > maxFill) {
    t.fail(`the default range ${range.text} has ${free} free addresses; the walkthrough needs a small one (/28, as hack/local/up.sh and hack/kind/config.yaml set)`)
    return
  }
  for (let i = 1; i <= free; i++) {
    const name = `e2e-walkthrough-fill-${String(i)}`
    const service = await cluster.createService(spec, name)
    fill.push(name)
    const ip = service.spec?.clusterIP ?? ''
    t.ok(allocatableIn(range, ip), `${name} got ${ip} from ${range.text}`)
  }
  const full = await failure(() => cluster.createService(spec, 'e2e-walkthrough-one-too-many'))
  t.match(full.status.message, /range is full/, `one more Service is refused: ${full.status.message ?? ''}`)
})

await file.spec(`a ServiceCIDR in the allowed block (${extraRange}) is admitted and becomes Ready`, async (t) => {
  const created = await cluster.createServiceCIDR({ name: extraName, cidrs: [extraRange], spec })
  t.same(created.spec?.cidrs, [extraRange], 'created as asked')
  const ready = await cluster.waitServiceCIDRReady(extraName)
  t.equal(ready.status?.conditions?.find((condition) => condition.type === 'Ready')?.status, 'True', 'kube-controller-manager marked it Ready')
})

await file.spec('new Services get ClusterIPs from the new range', async (t) => {
  const extra = parseIPv4CIDR(extraRange)!
  for (const name of ['e2e-walkthrough-new-1', 'e2e-walkthrough-new-2']) {
    const ip = await serviceFromNewRange(name)
    t.ok(inRange(extra, ip), `${name} got ${ip}, inside ${extraRange}`)
    t.notOk(range !== undefined && inRange(range, ip), `${ip} is not from the full default range`)
  }
})

await file.spec('clean up: Services deleted, then the unused ServiceCIDR is deleted and finalized', async (t) => {
  for (const name of [...fill, 'e2e-walkthrough-new-1', 'e2e-walkthrough-new-2']) await cluster.deleteService(name)
  fill = []
  const started = Date.now()
  await cluster.deleteServiceCIDR(extraName)
  t.equal(await cluster.getServiceCIDR(extraName), undefined, `${extraName} is gone (${((Date.now() - started) / 1000).toFixed(1)} s after the delete; the controller waits 10 s)`)
})

await finish(context)
