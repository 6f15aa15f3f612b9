// A kind cluster with servicecidr-guard installed from config/overlays/kind (hack/kind/e2e.sh). The
// webhook is a Deployment behind a Service; kube-apiserver is a static Pod on the node container
// "<cluster>-control-plane".
//
// A Pod that is terminating still answers kube-apiserver on the connections it already has (its
// preStop sleep and shutdown delay are there for exactly that), so "the webhook is stopped" and "the
// new policy is in force" both mean: no old Pod left at all, not merely none ready. And Pods that
// are ready are not yet reachable through the Service until kube-proxy has written their rules, so
// "the webhook is back" is proven the way kube-apiserver sees it: a dry-run request that the webhook
// answers.
//
// How each action is done, and why:
// - stopWebhook: the Deployment is scaled to 0 (its replica count is kept in an annotation so that
//   startWebhook, maybe in another spec process, restores it), and the Pods are deleted with a
//   grace period of 1 s: down at once, as after a crash, rather than after their preStop sleep and
//   drain (about 17 s), which would outlast the 10 s a deleted ServiceCIDR stays Terminating, which
//   05-faults needs. Returns once no Pod of the Deployment is left.
// - startWebhook: scaled back, `kubectl rollout status`, every Pod's /readyz 200, then reachable.
// - restartApiserver: `crictl stop` of the kube-apiserver container inside the node container
//   (`docker exec <cluster>-control-plane`); the kubelet starts a new container for the static Pod at
//   once. Moving /etc/kubernetes/manifests/kube-apiserver.yaml out and back would do the same, but
//   leaves the cluster without an apiserver if the suite dies in between; a stopped container is
//   always restarted. Returns once a new container runs, /readyz answers 200, and kube-controller-
//   manager and kube-scheduler lead again: each exits when it cannot renew its leader Lease for its
//   renew deadline (10 s), and the kubelet restarts it after a back-off that grows with every
//   restart, so after a long outage the cluster has no Deployment, ReplicaSet or EndpointSlice
//   controller and no scheduler for half a minute and more. A fault started in that window finds
//   a deleted Pod's endpoint still in the Service (kube-apiserver dials it: "connection refused")
//   and its replacement not scheduled: a fault of the control plane, not of the webhook. Then it
//   waits for kube-proxy, whose informers back off while the apiserver is down and may not watch
//   again for up to a minute: a canary Service, counted by kube-proxy's metrics (waitProxyFollows).
// - setPolicy: the policy ConfigMap the Deployment mounts (kustomize names it with a hash suffix, so
//   it is found through the Deployment's "policy" volume) gets the new policy.yaml, then
//   `kubectl rollout restart` and `rollout status`: a ConfigMap volume is refreshed by the kubelet
//   only after up to a minute, a restart is deterministic. Returns once every old Pod is gone and the
//   new ones are reachable: until then an old Pod may still decide by the old policy.
// - replicas.rollout: the same rolling update with no change of policy (13-kind-faults).
// - replicas.deletePod: deletes one Pod as `kubectl delete pod` does (its full grace period); returns
//   once it is gone and its replacement is ready and reachable (13-kind-faults).
// - webhookReadiness / webhookMetrics: each Pod's health port through the apiserver's Pod proxy.
// - replicas.kubeProxyMetrics: kube-proxy's metrics, from inside the node container.
// - replicas.probeConnections: a bash loop inside the node container (kube-apiserver's network
//   namespace: host network, so its connections to a ClusterIP go through kube-proxy's rules as
//   kube-apiserver's do) opens a TCP connection to the webhook Service every 50 ms and counts how
//   each ended. A replica that has stopped listening refuses it; one that has exited leaves it
//   unanswered (the node's bridge has no port for its address any more). kube-apiserver keeps its
//   connections open between reviews, so the review load alone opens few new ones: the probe is
//   what shows a terminating replica leaving before kube-proxy stops sending it new connections.
// - sharedReservation: the Deployment's container arguments (--no-shared-reservation or not).

import { AppsV1Api, type V1Deployment, type V1Pod } from '@kubernetes/client-node'
import { execFile } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { promisify } from 'node:util'
import { apiFailure, Cluster, deniedPrefix } from '../lib/kube.ts'
import { counter, parseSamples } from '../lib/prom.ts'
import { poll } from '../lib/wait.ts'
import { auditEventsOn, type AuditEvent, type ConnectionCounts, type Harness, type ReplicaFaults, type WebhookReadiness } from './types.ts'

const run = promisify(execFile)

const namespace = 'servicecidr-guard-system'
const deployment = 'servicecidr-guard'
const service = 'servicecidr-guard-webhook'
const podSelector = 'app.kubernetes.io/name=servicecidr-guard'
const replicasAnnotation = 'e2e.servicecidr-guard.dev/replicas'
/** The control plane's leader-elected components: their Leases in kube-system, named after them. */
const leaders = ['kube-controller-manager', 'kube-scheduler']

export class KindHarness implements Harness, ReplicaFaults {
  readonly name = 'kind'
  readonly replicas: ReplicaFaults = this
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

  /** Runs `command` in the node container; its output, once it exits. */
  private nodeRun(command: readonly string[], timeoutMs = 120_000): Promise<{ stdout: string }> {
    return run(this.containerTool, ['exec', `${this.clusterName}-control-plane`, ...command], { timeout: timeoutMs })
  }

  private async node(...command: string[]): Promise<string> {
    return (await this.nodeRun(command)).stdout.trim()
  }

  private readDeployment(): Promise<V1Deployment> {
    return this.apps.readNamespacedDeployment({ name: deployment, namespace })
  }

  private async listPods(): Promise<V1Pod[]> {
    return (await this.cluster.core.listNamespacedPod({ namespace, labelSelector: podSelector })).items
  }

  private async pods(): Promise<{ name: string, healthPort: number }[]> {
    return (await this.listPods())
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
    await this.kubectlRun('-n', namespace, 'delete', 'pods', '-l', podSelector, '--grace-period=1', '--wait=false')
    await poll(`no Pod of deployment/${deployment} left`, async () => (await this.listPods()).length === 0, { timeoutMs: 120_000, intervalMs: 250 })
  }

  async startWebhook(): Promise<void> {
    const current = await this.readDeployment()
    const replicas = Number(current.metadata?.annotations?.[replicasAnnotation] ?? current.spec?.replicas ?? 1) || 1
    await this.kubectlRun('-n', namespace, 'scale', `deployment/${deployment}`, `--replicas=${replicas}`)
    await this.settled(replicas)
  }

  /**
   * Returns once the Deployment has rolled out, no old or terminating Pod is left, each of the
   * `replicas` Pods answers /readyz 200, and kube-apiserver reaches the webhook through the Service.
   */
  private async settled(replicas: number): Promise<void> {
    await this.kubectlRun('-n', namespace, 'rollout', 'status', `deployment/${deployment}`, '--timeout=300s')
    await poll(`only the ${replicas} Pod(s) of the current ReplicaSet left`, async () => {
      const all = await this.listPods()
      return all.length === replicas && all.every((pod) => pod.metadata?.deletionTimestamp === undefined) &&
        new Set(all.map((pod) => pod.metadata?.labels?.['pod-template-hash'])).size === 1
    }, { timeoutMs: 180_000, intervalMs: 250 })
    await poll(`${replicas} webhook Pod(s) ready`, async () => {
      const all = await this.webhookReadiness()
      return all.length >= replicas && all.every((entry) => entry.status === 200)
    }, { timeoutMs: 180_000, intervalMs: 500 })
    await this.waitReachable()
  }

  /**
   * A dry-run create of an out-of-policy ServiceCIDR: answered by the webhook (denied; or admitted
   * under Warn or Audit) once kube-apiserver can reach it through the Service, "failed calling
   * webhook" before. A dry run changes nothing.
   */
  private async waitReachable(): Promise<void> {
    await poll(`kube-apiserver to reach the webhook through Service ${service}`, async () => {
      try {
        await this.cluster.net.createServiceCIDR({ body: { metadata: { name: 'e2e-harness-reachable' }, spec: { cidrs: ['10.100.0.0/24'] } }, dryRun: 'All' })
        return true
      } catch (error) {
        const failed = apiFailure(error)
        if (failed?.code === 403 && failed.status.message?.startsWith(deniedPrefix) === true) return true
        throw new Error(failed?.status.message ?? String(error), { cause: error })
      }
    }, { timeoutMs: 60_000, intervalMs: 250 })
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
    await this.waitLeaders(Date.now())
    await this.waitProxyFollows()
  }

  /**
   * Until kube-proxy sees the API again. Its informers back off while kube-apiserver is down
   * (client-go's reflector: 800 ms doubling to 30 s, plus up to as much again of jitter), so after
   * an outage of half a minute it may not watch again for up to a minute after /readyz. A Pod
   * deleted in that window stays in its rules after it has exited: new connections to the Service
   * are refused, then go unanswered (CI, 757bc50: 13-kind-faults (b) and (c), with "kube-proxy
   * wrote no endpoint change" for (b)). A canary Service that selects no Pod gets an EndpointSlice
   * from kube-controller-manager; once kube-proxy has counted a Service and an EndpointSlice event
   * since it was created, and has none left to write, it follows the Service's endpoints again.
   */
  private async waitProxyFollows(): Promise<void> {
    const changes = async (): Promise<{ services: number, endpoints: number, pending: number }> => {
      const samples = parseSamples(await this.kubeProxyMetrics())
      return {
        services: counter(samples, 'kubeproxy_sync_proxy_rules_service_changes_total'),
        endpoints: counter(samples, 'kubeproxy_sync_proxy_rules_endpoint_changes_total'),
        pending: counter(samples, 'kubeproxy_sync_proxy_rules_service_changes_pending') + counter(samples, 'kubeproxy_sync_proxy_rules_endpoint_changes_pending'),
      }
    }
    const before = await changes()
    const name = `e2e-kube-proxy-canary-${randomUUID().slice(0, 8)}`
    await this.cluster.core.createNamespacedService({
      namespace: 'default',
      body: { metadata: { name }, spec: { selector: { 'e2e.servicecidr-guard.dev/canary': name }, ports: [{ port: 80 }] } },
    })
    try {
      await poll(`kube-proxy to follow Services again after the kube-apiserver restart (canary Service default/${name})`, async () => {
        const now = await changes()
        return now.services > before.services && now.endpoints > before.endpoints && now.pending === 0
      }, { timeoutMs: 180_000, intervalMs: 500 })
    } finally {
      await this.cluster.core.deleteNamespacedService({ name, namespace: 'default' })
    }
  }

  /**
   * Until every component of `leaders` has renewed its Lease at or after `since` (the node shares
   * this machine's clock): a leader that renews through the new kube-apiserver keeps leading, one
   * that gave up has exited, and its Lease stays as it was until the restarted process takes it.
   */
  private async waitLeaders(since: number): Promise<void> {
    const renewedAt = async (name: string): Promise<number> => {
      const { status, body } = await this.cluster.rawJSON('GET', `/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/${name}`)
      if (status !== 200) return Number.NEGATIVE_INFINITY
      const renewTime = (body as { spec?: { renewTime?: string } }).spec?.renewTime
      return renewTime === undefined ? Number.NEGATIVE_INFINITY : Date.parse(renewTime)
    }
    await poll(`${leaders.join(' and ')} to lead again after the kube-apiserver restart`, async () => {
      const renewed = await Promise.all(leaders.map(renewedAt))
      return renewed.every((time) => time >= since)
    }, { timeoutMs: 180_000, intervalMs: 500 })
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
    await this.rollout()
  }

  async rollout(): Promise<void> {
    const current = await this.readDeployment()
    await this.kubectlRun('-n', namespace, 'rollout', 'restart', `deployment/${deployment}`)
    await this.settled(current.spec?.replicas ?? 1)
  }

  async podNames(): Promise<string[]> {
    return (await this.pods()).map((pod) => pod.name)
  }

  async podMetrics(name: string): Promise<string> {
    const pod = (await this.pods()).find((entry) => entry.name === name)
    if (pod === undefined) throw new Error(`no running Pod ${name} of deployment/${deployment}`)
    const response = await this.podGet(pod, '/metrics')
    if (response.status !== 200) throw new Error(`metrics of Pod ${name}: HTTP ${String(response.status)}`)
    return response.text
  }

  async kubeProxyMetrics(): Promise<string> {
    // kube-proxy serves its metrics on the node's loopback only (127.0.0.1:10249), and the node
    // image has no curl: one HTTP/1.0 request through bash's /dev/tcp.
    return this.node('bash', '-c', 'exec 3<>/dev/tcp/127.0.0.1/10249 && printf "GET /metrics HTTP/1.0\\r\\nHost: 127.0.0.1\\r\\n\\r\\n" >&3 && cat <&3')
  }

  async probeConnections(): Promise<() => Promise<ConnectionCounts>> {
    const webhookService = await this.cluster.core.readNamespacedService({ name: service, namespace })
    const address = webhookService.spec?.clusterIP
    const port = webhookService.spec?.ports?.[0]?.port
    if (address === undefined || port === undefined) throw new Error(`Service ${namespace}/${service} has no ClusterIP and port`)
    const stopFile = `/tmp/servicecidr-guard-probe-${randomUUID()}`
    // `timeout` exits 124 when the connection is not established within 3 s; bash's /dev/tcp fails
    // with 1 when it is refused. Counting ends when the stop file appears, or after 10 minutes
    // (longer than any fault) if the suite died without stopping it.
    // Each failure is printed after the counts with the time its attempt began (bash's
    // EPOCHREALTIME, seconds), so that a failure can be placed against the fault.
    const script = `
      ok=0 refused=0 unanswered=0 failed=''
      until [[ -e $3 ]] || ((SECONDS > 600)); do
        began=$EPOCHREALTIME
        timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>/dev/null
        case $? in 0) ok=$((ok + 1)) ;; 124) unanswered=$((unanswered + 1)) failed+=" U$began" ;; *) refused=$((refused + 1)) failed+=" R$began" ;; esac
        sleep 0.05
      done
      rm -f "$3"
      echo "$ok $refused $unanswered$failed"`
    const probing = this.nodeRun(['bash', '-c', script, 'probe', address, String(port), stopFile], 11 * 60_000)
    // Started or failed, the loop is awaited by stop(): a rejection here is handled there.
    probing.catch(() => undefined)
    return async () => {
      await this.node('touch', stopFile)
      const fields = (await probing).stdout.trim().split(' ')
      const [accepted, refused, unanswered] = fields.slice(0, 3).map(Number)
      if (accepted === undefined || refused === undefined || unanswered === undefined) throw new Error('the connection probe printed no counts')
      const failures = fields.slice(3).map((field) => ({ kind: field.startsWith('R') ? 'refused' as const : 'unanswered' as const, at: Number(field.slice(1)) * 1000 }))
      return { accepted, refused, unanswered, failures }
    }
  }

  async deletePod(name: string): Promise<void> {
    const current = await this.readDeployment()
    await this.cluster.core.deleteNamespacedPod({ name, namespace })
    await poll(`Pod ${name} to be gone`, async () => !(await this.listPods()).some((entry) => entry.metadata?.name === name), { timeoutMs: 120_000, intervalMs: 250 })
    await this.settled(current.spec?.replicas ?? 1)
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

  /**
   * From the audit log on the node (hack/kind/config*.yaml), the lines that name the object only:
   * the whole log outgrows what a child process's output may hold by the end of the suite.
   */
  async apiserverAuditEvents(name: string): Promise<readonly AuditEvent[]> {
    const log = '/var/log/kubernetes/audit.log'
    if (await this.node('sh', '-c', `test -f ${log} && echo yes || echo no`) !== 'yes') {
      throw new Error(`kube-apiserver on ${this.clusterName}-control-plane keeps no audit log at ${log}: the cluster was not created from hack/kind/config*.yaml`)
    }
    // grep exits 1 when no line matches: no event yet.
    return auditEventsOn(name, await this.node('sh', '-c', `grep -F -e '"name":"${name}"' ${log} || true`))
  }

  async sharedReservation(): Promise<boolean> {
    const current = await this.readDeployment()
    const args = current.spec?.template.spec?.containers.find((container) => container.name === 'webhook')?.args ?? []
    return !args.includes('--no-shared-reservation')
  }

  describe(): Record<string, string> {
    return {
      target: 'kind',
      cluster: this.clusterName,
      kubeconfig: this.kubeconfigPath,
      // Set by hack/kind/e2e.sh: where the node image and cert-manager came from.
      mode: process.env['KIND_MODE'] ?? 'unknown',
      nodeImage: process.env['KIND_NODE_IMAGE'] ?? 'unknown',
    }
  }
}
