// Other identities on the same cluster, for the specs that need a user who is not the admin: a
// ServiceAccount with exactly the rules given, its token from the TokenRequest API, and a kubeconfig
// whose contexts use it.

import { dump } from 'js-yaml'
import { readFileSync, writeFileSync } from 'node:fs'
import type { Cluster } from './kube.ts'
import { specLabel } from './kube.ts'

export const identityNamespace = 'default'

export interface PolicyRule {
  readonly apiGroups: readonly string[]
  readonly resources: readonly string[]
  readonly verbs: readonly string[]
  readonly resourceNames?: readonly string[]
}

async function send(cluster: Cluster, method: string, path: string, body: unknown, ok: readonly number[]): Promise<unknown> {
  const answer = await cluster.rawJSON(method, path, { body })
  if (!ok.includes(answer.status)) throw new Error(`${method} ${path}: HTTP ${String(answer.status)}: ${JSON.stringify(answer.body)}`)
  return answer.body
}

/**
 * A ServiceAccount `name` in the default namespace, bound by a ClusterRole of the same name to
 * `rules` (none: no ClusterRole at all), and a token for it. Everything is labelled for `spec`.
 */
export async function serviceAccountToken(cluster: Cluster, spec: string, name: string, rules: readonly PolicyRule[]): Promise<string> {
  const metadata = { name, labels: { [specLabel]: spec } }
  await send(cluster, 'POST', `/api/v1/namespaces/${identityNamespace}/serviceaccounts`, { apiVersion: 'v1', kind: 'ServiceAccount', metadata }, [201, 409])
  if (rules.length > 0) await setRules(cluster, spec, name, rules)
  const token = await send(cluster, 'POST', `/api/v1/namespaces/${identityNamespace}/serviceaccounts/${name}/token`, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: { expirationSeconds: 3600 },
  }, [201]) as { status: { token: string } }
  return token.status.token
}

/** Puts the ClusterRole `name` (and its binding to the ServiceAccount `name`) at exactly `rules`. */
export async function setRules(cluster: Cluster, spec: string, name: string, rules: readonly PolicyRule[]): Promise<void> {
  const metadata = { name, labels: { [specLabel]: spec } }
  const role = { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata, rules }
  const existing = await cluster.rawJSON('GET', `/apis/rbac.authorization.k8s.io/v1/clusterroles/${name}`)
  if (existing.status === 200) {
    const resourceVersion = (existing.body as { metadata: { resourceVersion: string } }).metadata.resourceVersion
    await send(cluster, 'PUT', `/apis/rbac.authorization.k8s.io/v1/clusterroles/${name}`, { ...role, metadata: { ...metadata, resourceVersion } }, [200])
  } else {
    await send(cluster, 'POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles', role, [201])
  }
  await send(cluster, 'POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata,
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
    subjects: [{ kind: 'ServiceAccount', name, namespace: identityNamespace }],
  }, [201, 409])
}

/** Removes what serviceAccountToken made for `spec`: ServiceAccounts, ClusterRoles and bindings. */
export async function removeIdentities(cluster: Cluster, spec: string): Promise<void> {
  const selector = `?labelSelector=${encodeURIComponent(`${specLabel}=${spec}`)}`
  for (const path of [
    '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
    '/apis/rbac.authorization.k8s.io/v1/clusterroles',
    `/api/v1/namespaces/${identityNamespace}/serviceaccounts`,
  ]) {
    const listed = await cluster.rawJSON('GET', `${path}${selector}`)
    for (const item of (listed.body as { items: { metadata: { name: string } }[] }).items) {
      await send(cluster, 'DELETE', `${path}/${item.metadata.name}`, undefined, [200, 404])
    }
  }
}

export interface ContextSpec {
  readonly name: string
  /** The API server; the admin's when absent. */
  readonly server?: string
  /** A bearer token; the admin's credentials when absent. */
  readonly token?: string
}

/** Writes a kubeconfig with one context each, on the admin kubeconfig's cluster (CA and server) unless told otherwise. */
export function writeKubeconfig(path: string, cluster: Cluster, contexts: readonly ContextSpec[]): void {
  const admin = cluster.kubeConfig
  const current = admin.getCurrentCluster()
  const adminUser = admin.getCurrentUser()
  if (current === null || adminUser === null) throw new Error('the admin kubeconfig has no current cluster or user')
  // Inline data, or the files a kubeconfig may name instead.
  const data = (inline: string | undefined, file: string | undefined): string => inline ?? (file === undefined ? '' : readFileSync(file).toString('base64'))
  const caData = data(current.caData, current.caFile)
  writeFileSync(path, dump({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: contexts.map((context) => ({ name: context.name, cluster: { server: context.server ?? current.server, 'certificate-authority-data': caData } })),
    users: contexts.map((context) => ({
      name: context.name,
      user: context.token === undefined
        ? { 'client-certificate-data': data(adminUser.certData, adminUser.certFile), 'client-key-data': data(adminUser.keyData, adminUser.keyFile), ...(adminUser.token === undefined ? {} : { token: adminUser.token }) }
        : { token: context.token },
    })),
    contexts: contexts.map((context) => ({ name: context.name, context: { cluster: context.name, user: context.name } })),
    'current-context': contexts[0]?.name ?? '',
  }))
}
