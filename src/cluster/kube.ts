// Where the Kubernetes API is: in-cluster service account, or a kubeconfig file and its contexts;
// and which namespace this process runs in.

import { ApiException, KubeConfig } from '@kubernetes/client-node'
import { ListError, statusMessage } from './api.ts'
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

/** The context names of a kubeconfig, in the order it lists them. */
export function contextNames(kubeConfig: KubeConfig): string[] {
  return kubeConfig.getContexts().map((context) => context.name)
}

/** A copy of the kubeconfig whose current context is `name`; throws if it has no such context. */
export function withContext(kubeConfig: KubeConfig, name: string): KubeConfig {
  if (kubeConfig.getContextObject(name) === null) {
    throw new Error(`the kubeconfig has no context "${name}" (it has: ${contextNames(kubeConfig).join(', ') || 'none'})`)
  }
  const copy = new KubeConfig()
  copy.loadFromOptions({ clusters: kubeConfig.getClusters(), users: kubeConfig.getUsers(), contexts: kubeConfig.getContexts(), currentContext: name })
  return copy
}

/** The API server of the kubeconfig's current context. */
export const serverOf = (kubeConfig: KubeConfig): string => kubeConfig.getCurrentCluster()?.server ?? ''

/**
 * One line saying why a request to the cluster failed, for a person: the apiserver's own message
 * for an HTTP error, the network error (ECONNREFUSED, ENOTFOUND, a certificate problem) for a
 * connection that failed, and the deadline for one that took too long.
 */
export function describeClusterError(error: unknown, server: string, timeoutMs?: number): string {
  if (error instanceof ApiException) {
    const body: unknown = error.body
    const text = typeof body === 'string' ? body : typeof body === 'object' && body !== null && 'message' in body && typeof body.message === 'string' ? body.message : ''
    const message = statusMessage(text)
    return `${server}: HTTP ${String(error.code)}${message === '' ? '' : `: ${message}`}`
  }
  if (error instanceof ListError && error.status !== undefined) {
    return `${server}: HTTP ${String(error.status)}${error.detail === undefined || error.detail === '' ? '' : `: ${error.detail}`}`
  }
  if (error instanceof Error && error.name === 'AbortError' && timeoutMs !== undefined) {
    return `${server}: no answer within ${String(timeoutMs / 1000)} s`
  }
  if (error instanceof Error) {
    // fetch wraps the network error: "fetch failed", cause { code: 'ECONNREFUSED', message }.
    const cause = error.cause
    const detail = cause instanceof Error ? (('code' in cause && typeof cause.code === 'string' ? `${cause.code}: ` : '') + cause.message) : error.message
    return `${server}: ${error.message === 'fetch failed' ? `cannot connect: ${detail}` : detail}`
  }
  return `${server}: ${String(error)}`
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
