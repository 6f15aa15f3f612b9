// Where the Kubernetes API is: in-cluster service account, or a kubeconfig file; and which namespace
// this process runs in.

import { KubeConfig } from '@kubernetes/client-node'
import { readFileSync } from 'node:fs'

export function loadKubeConfig(file: string | undefined, env: NodeJS.ProcessEnv = process.env): KubeConfig {
  const kubeConfig = new KubeConfig()
  if (file !== undefined) kubeConfig.loadFromFile(file)
  else if (env['KUBERNETES_SERVICE_HOST'] !== undefined && env['KUBECONFIG'] === undefined) kubeConfig.loadFromCluster()
  else kubeConfig.loadFromDefault()
  if (kubeConfig.getCurrentCluster() === null) {
    throw new Error('no Kubernetes cluster configured: pass --kubeconfig, set KUBECONFIG, or run in a cluster')
  }
  return kubeConfig
}

/** Written into every Pod that mounts a service account token. */
export const serviceAccountNamespaceFile = '/var/run/secrets/kubernetes.io/serviceaccount/namespace'

/**
 * The namespace this Pod runs in: POD_NAMESPACE (set from the Downward API by the Deployment), else
 * the service account's namespace file; undefined outside a Pod.
 */
export function podNamespace(env: NodeJS.ProcessEnv = process.env, read: (path: string) => string = (path) => readFileSync(path, 'utf8')): string | undefined {
  const fromEnv = env['POD_NAMESPACE']?.trim()
  if (fromEnv) return fromEnv
  try {
    return read(serviceAccountNamespaceFile).trim() || undefined
  } catch {
    return undefined
  }
}
