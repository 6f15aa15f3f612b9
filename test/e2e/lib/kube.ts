// The suite's view of a cluster: typed clients from @kubernetes/client-node for v1 and core, raw
// requests for what the typed clients do not cover (networking.k8s.io/v1beta1, /metrics, /readyz,
// namespace finalization), and the few waits and clean-ups every spec needs.

import { ApiException, CoreV1Api, KubeConfig, NetworkingV1Api, PatchStrategy, setHeaderOptions, type V1Service, type V1ServiceCIDR, type V1Status } from '@kubernetes/client-node'
import { request as httpsRequest, type RequestOptions } from 'node:https'
import { Fatal, poll } from './wait.ts'

/** Every object a spec creates carries this label with the spec's name, so clean-up finds it. */
export const specLabel = 'e2e.servicecidr-guard.dev/spec'
export const finalizer = 'networking.k8s.io/service-cidr-finalizer'
/**
 * A finalizer of the suite's own: a ServiceCIDR that carries it stays Terminating after its delete
 * until the spec removes it, whenever kube-controller-manager removes its own. Clean-up removes it.
 */
export const holdFinalizer = 'e2e.servicecidr-guard.dev/hold'
export const webhookName = 'validate.servicecidr-guard.dev'
/** The ValidatingWebhookConfiguration of config/webhook. */
export const webhookConfigurationName = 'servicecidr-guard'
const webhookConfigurations = '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations'
export const deniedPrefix = `admission webhook "${webhookName}" denied the request: `
/** Services are created here: the namespace exists everywhere, and needs no controller to delete. */
export const serviceNamespace = 'default'

export interface RawResponse {
  readonly status: number
  readonly headers: Record<string, string | string[] | undefined>
  readonly text: string
}

export interface RawOptions {
  readonly body?: unknown
  readonly contentType?: string
  readonly accept?: string
  /** Extra request headers, such as Impersonate-User; a list sends the header once per value. */
  readonly headers?: Record<string, string | string[]>
}

/** A failed API call: the HTTP status and the Status object the apiserver sent back. */
export interface APIFailure {
  readonly code: number
  readonly status: V1Status
  readonly headers: Record<string, string>
}

export function apiFailure(error: unknown): APIFailure | undefined {
  if (!(error instanceof ApiException)) return undefined
  const { code, body, headers } = error as ApiException<unknown>
  let status: V1Status = {}
  if (typeof body === 'string') {
    try {
      status = JSON.parse(body) as V1Status
    } catch {
      status = { message: body }
    }
  } else if (body !== null && typeof body === 'object') {
    status = body
  }
  return { code, status, headers }
}

/** Runs `call` and returns how it failed; throws if it succeeded or failed without an API status. */
export async function failure(call: () => Promise<unknown>): Promise<APIFailure> {
  let result: unknown
  try {
    result = await call()
  } catch (error) {
    const failed = apiFailure(error)
    if (failed === undefined) throw error
    return failed
  }
  throw new Error(`expected the request to be refused, but it succeeded: ${JSON.stringify(result).slice(0, 300)}`)
}

export function isNotFound(error: unknown): boolean {
  return apiFailure(error)?.code === 404
}

export interface ServiceCIDRInput {
  readonly name: string
  readonly cidrs: readonly string[]
  readonly spec: string
  readonly labels?: Record<string, string>
}

export function serviceCIDRObject({ name, cidrs, spec, labels }: ServiceCIDRInput, apiVersion = 'networking.k8s.io/v1'): V1ServiceCIDR {
  return { apiVersion, kind: 'ServiceCIDR', metadata: { name, labels: { ...labels, [specLabel]: spec } }, spec: { cidrs: [...cidrs] } }
}

export function readyCondition(object: V1ServiceCIDR): { status: string, reason?: string, message?: string } | undefined {
  return object.status?.conditions?.find((condition) => condition.type === 'Ready')
}

export class Cluster {
  readonly kubeConfig: KubeConfig
  readonly net: NetworkingV1Api
  readonly core: CoreV1Api

  constructor(kubeConfig: KubeConfig) {
    this.kubeConfig = kubeConfig
    this.net = kubeConfig.makeApiClient(NetworkingV1Api)
    this.core = kubeConfig.makeApiClient(CoreV1Api)
  }

  static fromFile(path: string): Cluster {
    const kubeConfig = new KubeConfig()
    kubeConfig.loadFromFile(path)
    return new Cluster(kubeConfig)
  }

  /** Any request to the apiserver with the kubeconfig's credentials; never throws on an HTTP status. */
  async raw(method: string, path: string, options: RawOptions = {}): Promise<RawResponse> {
    const server = this.kubeConfig.getCurrentCluster()?.server
    if (server === undefined) throw new Error('the kubeconfig has no current cluster')
    const url = new URL(path, server)
    const payload = options.body === undefined ? undefined : typeof options.body === 'string' ? options.body : JSON.stringify(options.body)
    const headers: Record<string, string | number | string[]> = { ...options.headers, accept: options.accept ?? 'application/json' }
    if (payload !== undefined) {
      headers['content-type'] = options.contentType ?? 'application/json'
      headers['content-length'] = Buffer.byteLength(payload)
    }
    const requestOptions: RequestOptions = { method, headers }
    await this.kubeConfig.applyToHTTPSOptions(requestOptions)
    return new Promise<RawResponse>((resolve, reject) => {
      const request = httpsRequest(url, requestOptions, (response) => {
        const chunks: Buffer[] = []
        response.on('data', (chunk: Buffer) => chunks.push(chunk))
        response.on('end', () => {
          resolve({ status: response.statusCode ?? 0, headers: response.headers, text: Buffer.concat(chunks).toString('utf8') })
        })
        response.on('error', reject)
      })
      request.setTimeout(30_000, () => request.destroy(new Error(`${method} ${path} timed out`)))
      request.on('error', reject)
      request.end(payload)
    })
  }

  /** raw(), with the body parsed as JSON (callers say what they expect it to hold). */
  async rawJSON(method: string, path: string, options: RawOptions = {}): Promise<{ status: number, body: unknown, headers: RawResponse['headers'] }> {
    const response = await this.raw(method, path, options)
    return { status: response.status, body: JSON.parse(response.text) as unknown, headers: response.headers }
  }

  async apiserverReady(): Promise<boolean> {
    try {
      const response = await this.raw('GET', '/readyz', { accept: 'text/plain' })
      return response.status === 200
    } catch {
      return false
    }
  }

  async waitApiserverReady(timeoutMs = 120_000): Promise<void> {
    await poll('kube-apiserver /readyz', () => this.apiserverReady(), { timeoutMs, intervalMs: 250 })
  }

  /** The versions of networking.k8s.io the cluster serves, from discovery. */
  async networkingVersions(): Promise<string[]> {
    const { status, body } = await this.rawJSON('GET', '/apis/networking.k8s.io')
    if (status === 404) return []
    if (status !== 200) throw new Error(`GET /apis/networking.k8s.io: HTTP ${status}`)
    return ((body as { versions?: { version: string }[] }).versions ?? []).map((entry) => entry.version)
  }

  async serverVersion(): Promise<string> {
    const { body } = await this.rawJSON('GET', '/version')
    return (body as { gitVersion: string }).gitVersion
  }

  async getServiceCIDR(name: string): Promise<V1ServiceCIDR | undefined> {
    try {
      return await this.net.readServiceCIDR({ name })
    } catch (error) {
      if (isNotFound(error)) return undefined
      throw error
    }
  }

  async createServiceCIDR(input: ServiceCIDRInput): Promise<V1ServiceCIDR> {
    return this.net.createServiceCIDR({ body: serviceCIDRObject(input) })
  }

  /** Waits for kube-controller-manager to mark the ServiceCIDR Ready (and to add its finalizer). */
  async waitServiceCIDRReady(name: string, timeoutMs = 60_000): Promise<V1ServiceCIDR> {
    return poll(`ServiceCIDR ${name} Ready`, async () => {
      const object = await this.getServiceCIDR(name)
      return object !== undefined && readyCondition(object)?.status === 'True' && object.metadata?.finalizers?.includes(finalizer) ? object : undefined
    }, { timeoutMs })
  }

  /** Waits until the ServiceCIDR is gone; the controller removes its finalizer 10 s after deletion. */
  async waitServiceCIDRGone(name: string, timeoutMs = 90_000): Promise<void> {
    await poll(`ServiceCIDR ${name} to be deleted`, async () => (await this.getServiceCIDR(name)) === undefined, { timeoutMs, intervalMs: 500 })
  }

  async createService(spec: string, name: string, options: { clusterIP?: string } = {}): Promise<V1Service> {
    return this.core.createNamespacedService({
      namespace: serviceNamespace,
      body: {
        metadata: { name, labels: { [specLabel]: spec } },
        spec: { type: 'ClusterIP', ports: [{ port: 80, protocol: 'TCP' }], ...(options.clusterIP === undefined ? {} : { clusterIP: options.clusterIP }) },
      },
    })
  }

  /** Deletes a Service and waits until both it and the IPAddress it held are gone. */
  async deleteService(name: string): Promise<void> {
    let ips: string[] = []
    try {
      const service = await this.core.readNamespacedService({ name, namespace: serviceNamespace })
      ips = service.spec?.clusterIPs ?? []
      await this.core.deleteNamespacedService({ name, namespace: serviceNamespace })
    } catch (error) {
      if (!isNotFound(error)) throw error
    }
    await this.waitIPAddressesGone(ips)
  }

  async waitIPAddressesGone(ips: readonly string[]): Promise<void> {
    for (const ip of ips.filter((entry) => entry !== 'None')) {
      await poll(`IPAddress ${ip} to be released`, async () => {
        try {
          await this.net.readIPAddress({ name: ip })
          return false
        } catch (error) {
          if (isNotFound(error)) return true
          throw error
        }
      })
    }
  }

  /**
   * Deletes a ServiceCIDR and waits until it is gone (timeoutMs 0: does not wait). The webhook's cache follows the API by a watch,
   * so a delete sent the moment the last Service went away may still be refused as in use: such a
   * refusal is retried for a few seconds, any other refusal is an error.
   */
  async deleteServiceCIDR(name: string, timeoutMs = 90_000): Promise<void> {
    await this.admitDeleteServiceCIDR(name)
    if (timeoutMs > 0) await this.waitServiceCIDRGone(name, timeoutMs)
  }

  /** Sends the DELETE (retrying a refusal as in use for a few seconds, see deleteServiceCIDR). */
  private async admitDeleteServiceCIDR(name: string): Promise<void> {
    await poll(`the deletion of ServiceCIDR ${name} to be admitted`, async () => {
      try {
        await this.net.deleteServiceCIDR({ name })
        return true
      } catch (error) {
        if (isNotFound(error)) return true
        const failed = apiFailure(error)
        if (failed?.code === 403 && /still has \d+ allocated address/.test(failed.status.message ?? '')) throw new Error(failed.status.message, { cause: error })
        throw new Fatal(`deleting ServiceCIDR ${name}: ${failed === undefined ? String(error) : `HTTP ${failed.code}: ${failed.status.message ?? ''}`}`, { cause: error })
      }
    }, { timeoutMs: 10_000 })
  }

  /**
   * Waits until a dry-run DELETE of the ServiceCIDR is refused as in use: the webhook learns of new
   * IPAddresses from its watch, moments after the apiserver wrote them. A dry run changes nothing,
   * so asking again is harmless; the real DELETE that follows must then be refused too.
   */
  async waitDeleteRefusedAsInUse(name: string, timeoutMs = 15_000): Promise<void> {
    await poll(`the webhook to refuse deleting ServiceCIDR ${name} as in use`, async () => {
      try {
        await this.net.deleteServiceCIDR({ name, dryRun: 'All' })
        return false
      } catch (error) {
        const failed = apiFailure(error)
        if (failed?.code === 403 && /still has \d+ allocated address/.test(failed.status.message ?? '')) return true
        throw new Fatal(`dry-run delete of ${name}: ${failed === undefined ? String(error) : `HTTP ${failed.code}: ${failed.status.message ?? ''}`}`, { cause: error })
      }
    }, { timeoutMs, intervalMs: 100 })
  }

  /**
   * Removes everything a spec labelled (every spec's, without one): its Services first (releasing
   * their addresses), then its ServiceCIDRs, waiting until they are gone. Run before a spec
   * (left-overs of a crashed run) and after. The ServiceCIDRs are deleted a few at a time and then
   * awaited together: each waits for kube-controller-manager's 10 s grace, so hundreds one after
   * the other would take an hour.
   */
  async cleanup(spec?: string, timeoutMs = 180_000): Promise<void> {
    const selector = spec === undefined ? specLabel : `${specLabel}=${spec}`
    const services = await this.core.listNamespacedService({ namespace: serviceNamespace, labelSelector: selector })
    for (const service of services.items) await this.deleteService(service.metadata?.name ?? '')
    const items = (await this.net.listServiceCIDR({ labelSelector: selector })).items
    const names = items.map((cidr) => cidr.metadata?.name ?? '')
    const held = items.filter((cidr) => cidr.metadata?.finalizers?.includes(holdFinalizer) === true).map((cidr) => cidr.metadata?.name ?? '')
    const queue = [...names]
    await Promise.all(Array.from({ length: Math.min(16, queue.length) }, async () => {
      for (let name = queue.shift(); name !== undefined; name = queue.shift()) await this.deleteServiceCIDR(name, 0)
    }))
    for (const name of held) await this.setHold(name, false)
    await poll(`the ${String(names.length)} ServiceCIDR(s) of ${spec ?? 'every spec'} to be deleted`, async () => (await this.net.listServiceCIDR({ labelSelector: selector })).items.length === 0, { timeoutMs, intervalMs: 1000 })
  }

  /**
   * Adds or removes holdFinalizer, by a metadata-only UPDATE (a JSON merge patch of the finalizers
   * with the resourceVersion read, retried on a conflict with kube-controller-manager changing its
   * own). No request if there is nothing to change, or no such ServiceCIDR.
   */
  async setHold(name: string, held: boolean): Promise<void> {
    await poll(`${holdFinalizer} ${held ? 'on' : 'off'} ${name}`, async () => {
      const current = await this.getServiceCIDR(name)
      const finalizers = current?.metadata?.finalizers ?? []
      if (current === undefined || finalizers.includes(holdFinalizer) === held) return true
      const body = { metadata: { resourceVersion: current.metadata?.resourceVersion, finalizers: held ? [...finalizers, holdFinalizer] : finalizers.filter((entry) => entry !== holdFinalizer) } }
      try {
        await this.net.patchServiceCIDR({ name, body }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch))
        return true
      } catch (error) {
        if (apiFailure(error)?.code === 409) return false
        throw new Fatal(`${held ? 'adding' : 'removing'} ${holdFinalizer} on ServiceCIDR ${name}: ${error instanceof Error ? error.message : String(error)}`)
      }
    }, { timeoutMs: 30_000, intervalMs: 200 })
  }

  /** The webhook's registration (or the one named `name`), or undefined when it is not registered. */
  async webhookConfiguration(name = webhookConfigurationName): Promise<Record<string, unknown> | undefined> {
    const { status, body } = await this.rawJSON('GET', `${webhookConfigurations}/${name}`)
    if (status === 404) return undefined
    if (status !== 200) throw new Error(`GET ValidatingWebhookConfiguration ${name}: HTTP ${status}`)
    return body as Record<string, unknown>
  }

  async deleteWebhookConfiguration(name = webhookConfigurationName): Promise<void> {
    const { status } = await this.raw('DELETE', `${webhookConfigurations}/${name}`)
    if (status !== 200 && status !== 404) throw new Error(`DELETE ValidatingWebhookConfiguration ${name}: HTTP ${status}`)
  }

  /** Registers a (saved) ValidatingWebhookConfiguration (it must not exist). */
  async createWebhookConfiguration(saved: Record<string, unknown>): Promise<void> {
    const name = (saved['metadata'] as { name?: string } | undefined)?.name ?? webhookConfigurationName
    const { status, text } = await this.raw('POST', webhookConfigurations, { body: saved })
    if (status !== 201) throw new Error(`POST ValidatingWebhookConfiguration ${name}: HTTP ${status}: ${text}`)
  }

  /**
   * Removes every ValidatingAdmissionPolicy and binding the suite created (labelled with specLabel),
   * bindings first. Returns once the apiserver no longer lists them.
   */
  async removeAdmissionPolicies(): Promise<void> {
    for (const kind of ['validatingadmissionpolicybindings', 'validatingadmissionpolicies']) {
      const path = `/apis/admissionregistration.k8s.io/v1/${kind}`
      const { status, body } = await this.rawJSON('GET', `${path}?labelSelector=${encodeURIComponent(specLabel)}`)
      if (status !== 200) throw new Error(`GET ${path}: HTTP ${status}`)
      for (const item of (body as { items: { metadata: { name: string } }[] }).items) {
        const deleted = await this.raw('DELETE', `${path}/${item.metadata.name}`)
        if (deleted.status !== 200 && deleted.status !== 404) throw new Error(`DELETE ${path}/${item.metadata.name}: HTTP ${deleted.status}`)
      }
    }
  }

  async metrics(): Promise<string> {
    const response = await this.raw('GET', '/metrics', { accept: 'text/plain' })
    if (response.status !== 200) throw new Error(`GET /metrics on kube-apiserver: HTTP ${response.status}`)
    return response.text
  }
}
