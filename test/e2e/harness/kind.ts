// A kind cluster with servicecidr-guard installed from config/overlays/kind (hack/kind/e2e.sh). The
// webhook is a Deployment; kube-apiserver is a static Pod on the node container
// "<cluster>-control-plane".
//
// How each action is done, and why:
// - stopWebhook: the Deployment is scaled to 0 (its replica count is kept in an annotation so that
//   startWebhook, maybe in another spec process, restores it); returns once the webhook Service has
//   no ready endpoint. The apiserver then fails closed ("failed calling webhook").
// - startWebhook: scaled back, `kubectl rollout status`, then every Pod's /readyz must be 200.
// - restartApiserver: `crictl stop` of the kube-apiserver container inside the node container
//   (`docker exec <cluster>-control-plane`); the kubelet starts a new container for the static Pod at
//   once. Moving /etc/kubernetes/manifests/kube-apiserver.yaml out and back would do the same, but
//   leaves the cluster without an apiserver if the suite dies in between; a stopped container is
//   always restarted. Returns once a new container runs and /readyz answers 200.
// - setPolicy: the policy ConfigMap the Deployment mounts (kustomize names it with a hash suffix, so
//   it is found through the Deployment's "policy" volume) gets the new policy.yaml, then
//   `kubectl rollout restart` and `rollout status`: a ConfigMap volume is refreshed by the kubelet
//   only after up to a minute, a restart is deterministic.
// - webhookReadiness / webhookMetrics: each Pod's health port through the apiserver's Pod proxy.
// - sharedReservation: the Deployment's container arguments (--no-shared-reservation or not).
//
// This harness cannot run on the development machine (no container engine); hack/kind/e2e.sh runs it.

import { AppsV1Api, type V1Deployment } from '@kubernetes/client-node'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { Cluster } from '../lib/kube.ts'
import { poll } from '../lib/wait.ts'
import type { Harness, WebhookReadiness } from './types.ts'

const run = promisify(execFile)

const namespace = 'servicecidr-guard-system'
const deployment = 'servicecidr-guard'
const service = 'servicecidr-guard-webhook'
const podSelector = 'app.kubernetes.io/name=servicecidr-guard'
const replicasAnnotation = 'e2e.servicecidr-guard.dev/replicas'

export class KindHarness implements Harness {
  readonly name = 'kind'
  readonly kubeconfigPath: string
  readonly kubectl: string
  readonly cluster: Cluster
  private readonly clusterName: string
  private readonly containerTool: string
  private readonly apps: AppsV1Api

  constructor() {
    const kubeconfig = process.env['KUBECONFIG']
    if (!kubeconfig) throw new Error('E2E_TARGET=kind needs KUBECONFIG (hack/kind/e2e.sh sets it)')
    this.kubeconfigPath = kubeconfig.split(':')[0] ?? kubeconfig
    this.kubectl = process.env['KUBECTL'] ?? 'kubectl'
    this.clusterName = process.env['KIND_CLUSTER_NAME'] ?? 'servicecidr-guard-e2e'
    this.containerTool = process.env['CONTAINER_TOOL'] ?? 'docker'
    this.cluster = Cluster.fromFile(this.kubeconfigPath)
    this.apps = this.cluster.kubeConfig.makeApiClient(AppsV1Api)
  }

  private async kubectlRun(...args: string[]): Promise<string> {
    const { stdout } = await run(this.kubectl, ['--kubeconfig', this.kubeconfigPath, ...args], { timeout: 360_000 })
    return stdout
  }

  private async node(...command: string[]): Promise<string> {
    const { stdout } = await run(this.containerTool, ['exec', `${this.clusterName}-control-plane`, ...command], { timeout: 120_000 })
    return stdout.trim()
  }

  private readDeployment(): Promise<V1Deployment> {
    return this.apps.readNamespacedDeployment({ name: deployment, namespace })
  }

  private async pods(): Promise<{ name: string, healthPort: number }[]> {
    const list = await this.cluster.core.listNamespacedPod({ namespace, labelSelector: podSelector })
    return list.items
      .filter((pod) => pod.metadata?.deletionTimestamp === undefined && pod.status?.phase === 'Running')
      .map((pod) => {
        const port = pod.spec?.containers.flatMap((container) => container.ports ?? []).find((entry) => entry.name === 'health')
        return { name: pod.metadata?.name ?? '', healthPort: port?.containerPort ?? 8081 }
      })
  }

  private async podGet(pod: { name: string, healthPort: number }, path: string): Promise<{ status: number, text: string }> {
    const response = await this.cluster.raw('GET', `/api/v1/namespaces/${namespace}/pods/${pod.name}:${pod.healthPort}/proxy${path}`, { accept: '*/*' })
    return { status: response.status, text: response.text }
  }

  async stopWebhook(): Promise<void> {
    const current = await this.readDeployment()
    const replicas = current.spec?.replicas ?? 1
    if (replicas > 0) await this.kubectlRun('-n', namespace, 'annotate', '--overwrite', `deployment/${deployment}`, `${replicasAnnotation}=${replicas}`)
    await this.kubectlRun('-n', namespace, 'scale', `deployment/${deployment}`, '--replicas=0')
    // Gone for kube-apiserver as soon as the webhook Service has no ready endpoint: it reaches the
    // webhook through the Service, which leaves out terminating Pods still draining (preStop, shutdown
    // delay). Waiting for the Pods to disappear would let the spec's 10 s finalizer grace run out.
    await poll(`no ready endpoint left for Service ${service}`, async () => {
      const slices = await this.cluster.rawJSON('GET', `/apis/discovery.k8s.io/v1/namespaces/${namespace}/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3D${service}`)
      if (slices.status !== 200) throw new Error(`listing EndpointSlices: HTTP ${String(slices.status)}`)
      const items = (slices.body as { items?: { endpoints?: { conditions?: { ready?: boolean } }[] }[] }).items ?? []
      return items.every((slice) => (slice.endpoints ?? []).every((endpoint) => endpoint.conditions?.ready === false))
    }, { timeoutMs: 120_000, intervalMs: 250 })
  }

  async startWebhook(): Promise<void> {
    const current = await this.readDeployment()
    const replicas = Number(current.metadata?.annotations?.[replicasAnnotation] ?? current.spec?.replicas ?? 1) || 1
    await this.kubectlRun('-n', namespace, 'scale', `deployment/${deployment}`, `--replicas=${replicas}`)
    await this.kubectlRun('-n', namespace, 'rollout', 'status', `deployment/${deployment}`, '--timeout=300s')
    await this.waitWebhookReady(replicas)
  }

  private async waitWebhookReady(replicas: number): Promise<void> {
    await poll(`${replicas} webhook Pod(s) ready`, async () => {
      const all = await this.webhookReadiness()
      return all.length >= replicas && all.every((entry) => entry.status === 200)
    }, { timeoutMs: 180_000, intervalMs: 1000 })
  }

  async restartApiserver(): Promise<void> {
    const before = await this.node('crictl', 'ps', '-q', '--name', 'kube-apiserver')
    if (before === '') throw new Error('no running kube-apiserver container on the node')
    await this.node('crictl', 'stop', ...before.split('\n'))
    await poll('the kubelet to start a new kube-apiserver container', async () => {
      const now = await this.node('crictl', 'ps', '-q', '--name', 'kube-apiserver')
      return now !== '' && !before.split('\n').includes(now.split('\n')[0] ?? '')
    }, { timeoutMs: 180_000, intervalMs: 1000 })
    await this.cluster.waitApiserverReady(180_000)
  }

  async setPolicy(yaml: string): Promise<void> {
    const current = await this.readDeployment()
    const volume = current.spec?.template.spec?.volumes?.find((entry) => entry.name === 'policy')
    const name = volume?.configMap?.name
    if (name === undefined) throw new Error(`deployment/${deployment} mounts no ConfigMap as volume "policy"`)
    const configMap = await this.cluster.core.readNamespacedConfigMap({ name, namespace })
    if (configMap.data?.['policy.yaml'] === yaml) return
    configMap.data = { ...configMap.data, 'policy.yaml': yaml }
    await this.cluster.core.replaceNamespacedConfigMap({ name, namespace, body: configMap })
    await this.kubectlRun('-n', namespace, 'rollout', 'restart', `deployment/${deployment}`)
    await this.kubectlRun('-n', namespace, 'rollout', 'status', `deployment/${deployment}`, '--timeout=300s')
    await this.waitWebhookReady(current.spec?.replicas ?? 1)
  }

  async webhookReadiness(): Promise<WebhookReadiness[]> {
    const pods = await this.pods()
    return Promise.all(pods.map(async (pod) => {
      const response = await this.podGet(pod, '/readyz')
      try {
        return { status: response.status, body: JSON.parse(response.text) as WebhookReadiness['body'] }
      } catch {
        return { status: response.status, body: {} }
      }
    }))
  }

  async webhookMetrics(): Promise<string[]> {
    const pods = await this.pods()
    return Promise.all(pods.map(async (pod) => {
      const response = await this.podGet(pod, '/metrics')
      if (response.status !== 200) throw new Error(`metrics of Pod ${pod.name}: HTTP ${response.status}`)
      return response.text
    }))
  }

  async sharedReservation(): Promise<boolean> {
    const current = await this.readDeployment()
    const args = current.spec?.template.spec?.containers.find((container) => container.name === 'webhook')?.args ?? []
    return !args.includes('--no-shared-reservation')
  }

  describe(): Record<string, string> {
    return { target: 'kind', cluster: this.clusterName, kubeconfig: this.kubeconfigPath }
  }
}
