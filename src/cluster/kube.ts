// Where the Kubernetes API is: in-cluster service account, or a kubeconfig file and its contexts;
// and which namespace this process runs in.

import { ApiException, KubeConfig } from '@kubernetes/client-node'
import { ListError, oneLine, statusMessage } from './api.ts'
import { describeReadError } from './files.ts'
import { existsSync, readFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { delimiter, join } from 'node:path'

const noCluster = 'no Kubernetes cluster configured: pass --kubeconfig, set KUBECONFIG, or run in a cluster'

function loadFile(kubeConfig: KubeConfig, file: string): void {
  try {
    kubeConfig.loadFromFile(file)
  } catch (error) {
    throw new Error(`cannot read the kubeconfig ${file}: ${oneLine(describeReadError(error))}`, { cause: error })
  }
}

/**
 * Adds to `into` what `next` has that it has not, as kubectl merges the files KUBECONFIG lists: the
 * first file to name a cluster, user or context, or to set current-context, wins.
 */
function merge(into: KubeConfig, next: KubeConfig): void {
  const named = (list: readonly { name: string }[], name: string): boolean => list.some((entry) => entry.name === name)
  for (const cluster of next.getClusters()) if (!named(into.getClusters(), cluster.name)) into.addCluster(cluster)
  for (const user of next.getUsers()) if (!named(into.getUsers(), user.name)) into.addUser(user)
  for (const context of next.getContexts()) if (!named(into.getContexts(), context.name)) into.addContext(context)
  if (!into.getCurrentContext() && next.getCurrentContext()) into.setCurrentContext(next.getCurrentContext())
}

/**
 * The kubeconfig as kubectl finds it: the file given; else in-cluster credentials (in a Pod without
 * KUBECONFIG); else the files KUBECONFIG lists, merged as kubectl merges them; else ~/.kube/config.
 * Nothing found is an error: client-node's loadFromDefault would make up a cluster at
 * http://localhost:8080, and a request to it fail with a message about TLS.
 */
export function readKubeConfig(file: string | undefined, env: NodeJS.ProcessEnv = process.env, home: string = homedir()): KubeConfig {
  const kubeConfig = new KubeConfig()
  const listed = (env['KUBECONFIG'] ?? '').split(delimiter).filter((name) => name !== '')
  if (file !== undefined) {
    loadFile(kubeConfig, file)
  } else if (env['KUBERNETES_SERVICE_HOST'] !== undefined && listed.length === 0) {
    kubeConfig.loadFromCluster()
  } else if (listed.length > 0) {
    // Files KUBECONFIG lists that do not exist are skipped, as client-go's ClientConfigLoadingRules.Load skips them.
    const [first, ...rest] = listed.filter((name) => existsSync(name))
    if (first === undefined) throw new Error(`${noCluster} (no file that KUBECONFIG lists exists: ${listed.join(', ')})`)
    loadFile(kubeConfig, first)
    for (const name of rest) {
      const next = new KubeConfig()
      loadFile(next, name)
      merge(kubeConfig, next)
    }
  } else {
    const config = join(home, '.kube', 'config')
    if (!existsSync(config)) throw new Error(`${noCluster} (there is no ${config})`)
    loadFile(kubeConfig, config)
  }
  return kubeConfig
}

/**
 * The kubeconfig's current context can be used: it names a cluster, and the cluster is served over
 * HTTPS. client-node refuses plain HTTP unless TLS verification is off, with a message that does not
 * say what to do; a kubectl proxy (http://127.0.0.1:8001) is the usual case.
 */
export function requireCluster(kubeConfig: KubeConfig, file: string | undefined): KubeConfig {
  const cluster = kubeConfig.getCurrentCluster()
  if (cluster === null) {
    const context = kubeConfig.getCurrentContext()
    const where = `the kubeconfig${file === undefined ? '' : ` ${file}`}`
    if (kubeConfig.getContexts().length === 0) throw new Error(file === undefined ? noCluster : `${where} has no contexts`)
    if (!context) throw new Error(`${where} sets no current-context: set one, or name contexts with --context`)
    throw new Error(`${where} names no cluster for context "${context}"`)
  }
  if (cluster.server.startsWith('http:') && !cluster.skipTLSVerify) {
    throw new Error(`${cluster.server} is plain HTTP: servicecidr-guard reads an API server over HTTPS only (not through kubectl proxy); use the kubeconfig that kubectl itself uses`)
  }
  return kubeConfig
}

export function loadKubeConfig(file: string | undefined, env: NodeJS.ProcessEnv = process.env, home: string = homedir()): KubeConfig {
  return requireCluster(readKubeConfig(file, env, home), file)
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
