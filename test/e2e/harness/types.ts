// What the specs need from a cluster beyond its API: the few actions that differ between a local
// control plane (processes on this machine) and a kind cluster (Pods and static Pods).

import type { Cluster } from '../lib/kube.ts'

/** The fields of an audit.k8s.io/v1 Event the specs read. */
export interface AuditEvent {
  readonly stage?: string
  readonly verb?: string
  readonly objectRef?: { readonly resource?: string, readonly name?: string }
  readonly responseStatus?: { readonly code?: number }
  readonly annotations?: Readonly<Record<string, string>>
}

/** The events of an audit log (one JSON event a line) whose object is the ServiceCIDR `name`. */
export function auditEventsOn(name: string, text: string): AuditEvent[] {
  return text.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as AuditEvent)
    .filter((event) => event.objectRef?.resource === 'servicecidrs' && event.objectRef.name === name)
}

export interface WebhookReadiness {
  readonly status: number
  /** The webhook's /readyz document: { ready, checks: { cache: { state }, policy: { loadedAt } ... } } */
  readonly body: {
    readonly ready?: boolean
    readonly checks?: {
      readonly cache?: { readonly state?: string, readonly relists?: number, readonly servicecidrs?: number, readonly ipaddresses?: number }
      readonly policy?: { readonly loadedAt?: string, readonly valid?: boolean, readonly lastError?: string }
      readonly reservations?: { readonly shared?: boolean, readonly lease?: string, readonly lastError?: string }
    }
  }
}

/**
 * Faults that only a webhook run as a Deployment of several replicas can have (kind). The local
 * control plane runs its replicas as processes: there it is undefined.
 */
export interface ReplicaFaults {
  /** The names of the webhook's running Pods. */
  podNames(): Promise<string[]>
  /** The Prometheus text of one Pod. */
  podMetrics(name: string): Promise<string>
  /** Deletes one Pod as `kubectl delete pod` does; returns once its replacement is ready and reachable. */
  deletePod(name: string): Promise<void>
  /** A rolling update with no change (`kubectl rollout restart`); returns once only new Pods are left, ready and reachable. */
  rollout(): Promise<void>
  /**
   * The Prometheus text of kube-proxy on the node: its kubeproxy_network_programming_duration_seconds
   * says how long after a Pod changed the Service rules that route to it were written.
   */
  kubeProxyMetrics(): Promise<string>
  /**
   * Opens a new TCP connection to the webhook Service's ClusterIP, as kube-apiserver does when it
   * needs one, every 50 ms from now on; the returned function stops and counts them.
   */
  probeConnections(): Promise<() => Promise<ConnectionCounts>>
}

/** New connections to the webhook Service: accepted, refused (RST), or unanswered (no SYN-ACK within 3 s). */
export interface ConnectionCounts {
  readonly accepted: number
  readonly refused: number
  readonly unanswered: number
  /** Each refused or unanswered connection, and when its attempt began (ms since the epoch; NaN if the node's bash cannot tell). */
  readonly failures: readonly { readonly kind: 'refused' | 'unanswered', readonly at: number }[]
}

export interface Harness {
  readonly name: 'local' | 'kind'
  /** Where the kubeconfig is, for tools run as child processes (kubectl, the audit command). */
  readonly kubeconfigPath: string
  /** A kubectl matching the cluster's version where there is one. */
  readonly kubectl: string
  readonly cluster: Cluster
  /** Takes the webhook away (process stopped / Deployment scaled to 0); returns once it is gone. */
  stopWebhook(): Promise<void>
  /** Brings the webhook back; returns once it reports ready. */
  startWebhook(): Promise<void>
  /** Restarts kube-apiserver; returns once its /readyz answers 200 again. */
  restartApiserver(): Promise<void>
  /** Puts a policy (YAML text) in force; returns once the webhook has loaded it. */
  setPolicy(yaml: string): Promise<void>
  /** The /readyz of each webhook instance (replica), in a stable order. */
  webhookReadiness(): Promise<WebhookReadiness[]>
  /** The Prometheus text of each webhook instance (replica), in the same order. */
  webhookMetrics(): Promise<string[]>
  /**
   * Whether the replicas share their reservations (serve without --no-shared-reservation): local,
   * SHARED_RESERVATION of hack/local/up.sh; kind, the Deployment's arguments.
   */
  sharedReservation(): Promise<boolean>
  /**
   * kube-apiserver's audit events on the ServiceCIDR `name` (hack/audit-policy.yaml audits every
   * ServiceCIDR request): local, from logs/audit.log; kind, from /var/log/kubernetes/audit.log on
   * the node (hack/kind/config*.yaml).
   */
  apiserverAuditEvents(name: string): Promise<readonly AuditEvent[]>
  /** Pod faults of the webhook's Deployment; undefined where the replicas are processes (local). */
  readonly replicas: ReplicaFaults | undefined
  /** What the summary should say about the target (versions, names). */
  describe(): Record<string, string>
}
