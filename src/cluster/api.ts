// The ServiceCIDR and IPAddress APIs: which version the cluster serves, and paged LISTs that keep
// only a small record of each object (a full IPAddress object costs ~10x its record in memory).

import { ApisApi, CustomObjectsApi, Observable, type ConfigurationOptions, type KubeConfig } from '@kubernetes/client-node'
import type { ObjectLike } from '../policy/state.ts'

export const group = 'networking.k8s.io'
/** Newest first: v1 is GA in 1.33; v1beta1 from 1.31 (removed 1.37); v1alpha1 from 1.27 (gone in 1.34). */
const knownVersions = ['v1', 'v1beta1', 'v1alpha1']

export interface Resource {
  readonly group: string
  readonly version: string
  readonly plural: 'servicecidrs' | 'ipaddresses'
}

export class APINotServedError extends Error {}

/** Per-request options that abort the request when `signal` does (a deadline, for an audit). */
export function withSignal(signal: AbortSignal | undefined): ConfigurationOptions | undefined {
  if (signal === undefined) return undefined
  return {
    middleware: [{
      // The object-parameter APIs take the observable form of middleware (the library's own stub).
      pre: (context) => {
        context.setSignal(signal)
        return new Observable(Promise.resolve(context))
      },
      post: (response) => new Observable(Promise.resolve(response)),
    }],
    middlewareMergeStrategy: 'append',
  }
}

/** The newest networking.k8s.io version that serves ServiceCIDRs, from API discovery. */
export async function discoverVersion(kubeConfig: KubeConfig, signal?: AbortSignal): Promise<string> {
  const list = await kubeConfig.makeApiClient(ApisApi).getAPIVersions({}, withSignal(signal))
  const served = list.groups.find((entry) => entry.name === group)?.versions.map((entry) => entry.version) ?? []
  const version = knownVersions.find((candidate) => served.includes(candidate))
  if (version === undefined) {
    throw new APINotServedError(
      `the cluster serves no ServiceCIDR API (${group} versions: ${served.join(', ') || 'none'}); ` +
        'Kubernetes 1.33+ serves v1; 1.31 and 1.32 need the MultiCIDRServiceAllocator feature gate and networking.k8s.io/v1beta1 enabled',
    )
  }
  return version
}

export interface ListPage {
  readonly items: ObjectLike[]
  readonly resourceVersion: string
}

interface RawList {
  items?: ObjectLike[]
  metadata?: { resourceVersion?: string, continue?: string }
}

/**
 * Lists every object in pages of `limit`, handing each page to `onPage` so that only one page of
 * full objects is held at a time. Returns the list's resourceVersion, from which a watch starts.
 */
export async function listAll(
  kubeConfig: KubeConfig,
  resource: Resource,
  onPage: (items: readonly ObjectLike[]) => void,
  limit = 500,
  signal?: AbortSignal,
): Promise<string> {
  const api = kubeConfig.makeApiClient(CustomObjectsApi)
  let next: string | undefined
  let resourceVersion = ''
  do {
    const page = (await api.listClusterCustomObject({
      group: resource.group,
      version: resource.version,
      plural: resource.plural,
      limit,
      ...(next === undefined ? {} : { _continue: next }),
    }, withSignal(signal))) as RawList
    onPage(page.items ?? [])
    resourceVersion = page.metadata?.resourceVersion ?? resourceVersion
    next = page.metadata?.continue || undefined
  } while (next !== undefined)
  return resourceVersion
}
