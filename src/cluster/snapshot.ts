// One read of the live cluster's ServiceCIDRs and IPAddresses, for `audit`: the newest served API
// version, then paged LISTs that keep only the small records.

import type { KubeConfig } from '@kubernetes/client-node'
import { ClusterState, StringPool, toIPAddressRecord, toServiceCIDRRecord } from '../policy/state.ts'
import type { IPAddressRecord, ServiceCIDRRecord } from '../policy/types.ts'
import { discoverVersion, group, listAll } from './api.ts'

/** The cluster's ServiceCIDRs and IPAddresses; `signal` aborts every request (a deadline). */
export async function readClusterSnapshot(kubeConfig: KubeConfig, signal?: AbortSignal): Promise<ClusterState> {
  const version = await discoverVersion(kubeConfig, signal)
  const serviceCIDRs: ServiceCIDRRecord[] = []
  const ipAddresses: IPAddressRecord[] = []
  const pool = new StringPool()
  // IPAddresses first. The two LISTs are not one snapshot; in this order an address allocated from
  // a ServiceCIDR created between them is merely missed, instead of being reported as an orphan
  // because its ServiceCIDR was. (A ServiceCIDR only goes away once no address needs it.)
  await listAll(kubeConfig, { group, version, plural: 'ipaddresses' }, (items) => {
    for (const item of items) {
      const record = toIPAddressRecord(item, pool)
      if (record) ipAddresses.push(record)
    }
  }, undefined, signal)
  await listAll(kubeConfig, { group, version, plural: 'servicecidrs' }, (items) => {
    for (const item of items) {
      const record = toServiceCIDRRecord(item)
      if (record) serviceCIDRs.push(record)
    }
  }, undefined, signal)
  const state = new ClusterState()
  state.replaceServiceCIDRs(serviceCIDRs)
  state.replaceIPAddresses(ipAddresses)
  return state
}
