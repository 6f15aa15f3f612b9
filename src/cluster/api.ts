// The ServiceCIDR and IPAddress APIs: which version the cluster serves, and paged LISTs that keep
// only what a record of each object needs (a full IPAddress object costs ~10x its record in memory).

import { ApisApi, CustomObjectsApi, HttpMethod, Observable, RequestContext, type ConfigurationOptions, type KubeConfig } from '@kubernetes/client-node'
import { errors, request, type Dispatcher } from 'undici'
import { object, objects, readJSON, string, strings, withoutMismatches } from '../json/reader.ts'
import { familyLabel, managedByLabel, type ObjectLike } from '../policy/state.ts'

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

/**
 * The newest networking.k8s.io version that serves ServiceCIDRs, from API discovery. A version of
 * the group is not enough: every cluster serves networking.k8s.io/v1 for Ingress and NetworkPolicy,
 * and only 1.33+ serves servicecidrs there; 1.31 and 1.32 serve them in v1beta1 alone, and
 * v1alpha1 had only ipaddresses before 1.29. So each served version's resources are read, newest
 * first, as kubectl finds a resource (discovery's ServerResourcesForGroupVersion).
 */
export async function discoverVersion(kubeConfig: KubeConfig, signal?: AbortSignal): Promise<string> {
  const list = await kubeConfig.makeApiClient(ApisApi).getAPIVersions({}, withSignal(signal))
  const served = list.groups.find((entry) => entry.name === group)?.versions.map((entry) => entry.version) ?? []
  for (const version of knownVersions) {
    if (!served.includes(version)) continue
    // GET /apis/{group}/{version}: the generated client has it for any group, not only custom ones.
    const { resources } = await kubeConfig.makeApiClient(CustomObjectsApi).getAPIResources({ group, version }, withSignal(signal))
    if (resources.some((resource) => resource.name === 'servicecidrs')) return version
  }
  throw new APINotServedError(
    `the cluster serves no ServiceCIDR API (${group} versions: ${served.join(', ') || 'none'}${served.length === 0 ? '' : ', none with servicecidrs'}); ` +
      'Kubernetes 1.33+ serves v1; 1.31 and 1.32 need the MultiCIDRServiceAllocator feature gate and networking.k8s.io/v1beta1 enabled',
  )
}

/**
 * The URL of `path` on `server`: appended, not resolved, since an absolute path would drop the
 * server's own (Rancher's /k8s/clusters/ID, an API gateway's prefix).
 */
export function apiURL(server: string, path: string): string {
  return `${server.replace(/\/+$/, '')}${path}`
}

const pageShape = object({
  metadata: object({ resourceVersion: string, continue: string }),
  items: objects(object({
    metadata: object({ name: string, labels: object({ [familyLabel]: string, [managedByLabel]: string }), deletionTimestamp: string }),
    spec: object({ cidrs: strings(16), parentRef: object({ group: string, resource: string, namespace: string, name: string }) }),
  })),
})

interface Page {
  readonly metadata?: { readonly resourceVersion?: string, readonly continue?: string }
  readonly items?: readonly ObjectLike[]
}

/** A LIST that failed; `status` is the HTTP status and `detail` the apiserver's own message, if it answered. */
export class ListError extends Error {
  readonly status: number | undefined
  readonly detail: string | undefined

  constructor(message: string, status?: number, detail?: string) {
    super(message)
    this.status = status
    this.detail = detail
  }
}

/**
 * `text` as one line of at most `max` characters: whitespace runs (the lines of a proxy's HTML
 * error page) become one space. Errors are printed one a line, and a fleet audit one a row.
 */
export function oneLine(text: string, max = 200): string {
  const line = text.replace(/\s+/g, ' ').trim()
  return line.length <= max ? line : `${line.slice(0, max - 1).trimEnd()}…`
}

/** The message of a Kubernetes Status object in `text`, else the start of the text itself; one line. */
export function statusMessage(text: string): string {
  try {
    const parsed = JSON.parse(text) as { message?: unknown }
    if (typeof parsed.message === 'string') return oneLine(parsed.message, 1000)
  } catch {
    // not a Status: fall through to the raw text
  }
  return oneLine(text)
}

/**
 * Lists every object in pages of `limit`, handing each page to `onPage`. Returns the list's
 * resourceVersion, from which a watch starts.
 *
 * A page is read from its raw bytes, keeping only what the cache projects (name, two labels,
 * deletionTimestamp, cidrs, parentRef): JSON.parse would build each whole object, managedFields
 * and all, only for the projection to drop it. 5,000 a page rather than client-go's 500: against
 * 100,000 IPAddresses the round trips were most of the start-up time (docs/benchmarks.md,
 * "Start-up"). No gzip: the apiserver compresses only when asked, and on a cluster network the
 * CPU costs both sides more than the bytes. `signal` aborts the request in flight (an audit's
 * deadline). A page whose answer stops for `pageTimeoutMs` is given up: kube-apiserver ends every
 * LIST within its --request-timeout (1 min by default), so only a connection to an apiserver that
 * is gone (kept alive in the pool, its packets dropped) waits longer, and undici would wait 5 min.
 */
export async function listAll(
  kubeConfig: KubeConfig,
  resource: Resource,
  onPage: (items: readonly ObjectLike[]) => void,
  limit = 5000,
  signal?: AbortSignal,
  pageTimeoutMs = 60_000,
): Promise<string> {
  const cluster = kubeConfig.getCurrentCluster()
  if (cluster === null) throw new ListError('the kubeconfig names no cluster')
  const base = apiURL(cluster.server, `/apis/${resource.group}/${resource.version}/${resource.plural}?limit=${limit}`)
  let next: string | undefined
  let resourceVersion = ''
  do {
    // The same authentication and TLS as every client-node call (KubeConfig is its SecurityAuthentication).
    const context = new RequestContext(next === undefined ? base : `${base}&continue=${encodeURIComponent(next)}`, HttpMethod.GET)
    await kubeConfig.applySecurityAuthentication(context)
    let body: Buffer
    let statusCode: number
    try {
      const response = await request(context.getUrl(), {
        method: 'GET',
        headers: { ...context.getHeaders(), accept: 'application/json' },
        headersTimeout: pageTimeoutMs,
        bodyTimeout: pageTimeoutMs,
        ...(context.getDispatcher() === undefined ? {} : { dispatcher: context.getDispatcher() as Dispatcher }),
        ...(signal === undefined ? {} : { signal }),
      })
      statusCode = response.statusCode
      body = Buffer.from(await response.body.arrayBuffer())
    } catch (error) {
      if (error instanceof errors.HeadersTimeoutError || error instanceof errors.BodyTimeoutError) {
        throw new ListError(`listing ${resource.plural}: no answer within ${String(pageTimeoutMs / 1000)} s`)
      }
      throw error
    }
    if (statusCode !== 200) {
      const detail = statusMessage(body.toString('utf8', 0, 4096))
      throw new ListError(`listing ${resource.plural}: HTTP ${String(statusCode)}: ${detail}`, statusCode, detail)
    }
    const page = withoutMismatches(readJSON(body, pageShape)) as Page
    onPage(page.items ?? [])
    resourceVersion = page.metadata?.resourceVersion ?? resourceVersion
    next = page.metadata?.continue || undefined
  } while (next !== undefined)
  return resourceVersion
}
