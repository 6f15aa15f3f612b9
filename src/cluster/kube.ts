// Where the Kubernetes API is: in-cluster service account, or a kubeconfig file and its contexts;
// and which namespace this process runs in.

import { ApiException, KubeConfig, type ConfigOptions } from '@kubernetes/client-node'
import { parseYAMLDocuments } from '../config/yaml.ts'
import { ListError, oneLine, statusMessage } from './api.ts'
import { describeReadError } from './files.ts'
import { existsSync, readFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { delimiter, dirname, join } from 'node:path'

const noCluster = 'no Kubernetes cluster configured: pass --kubeconfig, set KUBECONFIG, or run in a cluster'

/** A kubeconfig as read: what client-node loaded, and the contexts it left out as invalid, each with why. */
export interface LoadedKubeConfig {
  readonly config: KubeConfig
  readonly invalidContexts: ReadonlyMap<string, string>
}

/**
 * An invalid entry (`kubectl config set-context scratch --namespace=dev` writes a context with no
 * cluster) is left out rather than failing the whole file, as kubectl uses the other contexts.
 * client-node's ActionOnInvalid.FILTER: the constant is not exported from the package's index.
 */
const skipInvalid: Partial<ConfigOptions> = { onInvalidEntry: 'filter' }

/**
 * Why each named context of the kubeconfig's text that client-node left out is invalid: its
 * newContexts (config_types.js) keeps a context only if it has a `context` that names a cluster.
 */
function invalidContexts(text: string, kept: KubeConfig): Map<string, string> {
  const [document] = parseYAMLDocuments(text)
  const listed: unknown = typeof document === 'object' && document !== null && 'contexts' in document ? document.contexts : undefined
  const invalid = new Map<string, string>()
  if (!Array.isArray(listed)) return invalid
  listed.forEach((entry: unknown, index) => {
    if (typeof entry !== 'object' || entry === null || !('name' in entry) || typeof entry.name !== 'string' || entry.name === '') return
    if (kept.getContextObject(entry.name) !== null || invalid.has(entry.name)) return
    const named = `the kubeconfig's context "${entry.name}"`
    invalid.set(entry.name, 'context' in entry && typeof entry.context === 'object' && entry.context !== null
      ? `${named} names no cluster (contexts[${String(index)}].context.cluster is empty): set one with kubectl config set-context ${entry.name} --cluster NAME`
      : `${named} is empty (contexts[${String(index)}] has no context)`)
  })
  return invalid
}

/** Loads `file` as client-node's loadFromFile does, but without its invalid entries; answers the invalid contexts. */
function loadFile(kubeConfig: KubeConfig, file: string): Map<string, string> {
  try {
    const text = readFileSync(file, 'utf8')
    kubeConfig.loadFromString(text, skipInvalid)
    kubeConfig.makePathsAbsolute(dirname(file))
    return invalidContexts(text, kubeConfig)
  } catch (error) {
    throw new Error(`cannot read the kubeconfig ${file}: ${oneLine(describeReadError(error))}`, { cause: error })
  }
}

/**
 * Adds to `into` what `next` has that it has not, as kubectl merges the files KUBECONFIG lists: the
 * first file to name a cluster, user or context (valid or not), or to set current-context, wins.
 */
function merge(into: KubeConfig, invalid: Map<string, string>, next: KubeConfig, nextInvalid: ReadonlyMap<string, string>): void {
  const named = (list: readonly { name: string }[], name: string): boolean => list.some((entry) => entry.name === name)
  for (const cluster of next.getClusters()) if (!named(into.getClusters(), cluster.name)) into.addCluster(cluster)
  for (const user of next.getUsers()) if (!named(into.getUsers(), user.name)) into.addUser(user)
  for (const context of next.getContexts()) if (!named(into.getContexts(), context.name) && !invalid.has(context.name)) into.addContext(context)
  for (const [name, why] of nextInvalid) if (!named(into.getContexts(), name) && !invalid.has(name)) invalid.set(name, why)
  if (!into.getCurrentContext() && next.getCurrentContext()) into.setCurrentContext(next.getCurrentContext())
}

/**
 * The kubeconfig as kubectl finds it: the file given; else in-cluster credentials (in a Pod without
 * KUBECONFIG); else the files KUBECONFIG lists, merged as kubectl merges them; else ~/.kube/config.
 * Nothing found is an error: client-node's loadFromDefault would make up a cluster at
 * http://localhost:8080, and a request to it fail with a message about TLS.
 */
export function readKubeConfig(file: string | undefined, env: NodeJS.ProcessEnv = process.env, home: string = homedir()): LoadedKubeConfig {
  const config = new KubeConfig()
  const listed = (env['KUBECONFIG'] ?? '').split(delimiter).filter((name) => name !== '')
  if (file !== undefined) return { config, invalidContexts: loadFile(config, file) }
  if (env['KUBERNETES_SERVICE_HOST'] !== undefined && listed.length === 0) {
    config.loadFromCluster()
    return { config, invalidContexts: new Map() }
  }
  if (listed.length > 0) {
    // Files KUBECONFIG lists that do not exist are skipped, as client-go's ClientConfigLoadingRules.Load skips them.
    const [first, ...rest] = listed.filter((name) => existsSync(name))
    if (first === undefined) throw new Error(`${noCluster} (no file that KUBECONFIG lists exists: ${listed.join(', ')})`)
    const invalid = loadFile(config, first)
    for (const name of rest) {
      const next = new KubeConfig()
      merge(config, invalid, next, loadFile(next, name))
    }
    return { config, invalidContexts: invalid }
  }
  const path = join(home, '.kube', 'config')
  if (!existsSync(path)) throw new Error(`${noCluster} (there is no ${path})`)
  return { config, invalidContexts: loadFile(config, path) }
}

/**
 * The kubeconfig's current context can be used: it is valid, it names a cluster, and the cluster is
 * served over HTTPS. client-node refuses plain HTTP unless TLS verification is off, with a message
 * that does not say what to do; a kubectl proxy (http://127.0.0.1:8001) is the usual case.
 */
export function requireCluster({ config: kubeConfig, invalidContexts }: LoadedKubeConfig, file: string | undefined): KubeConfig {
  const cluster = kubeConfig.getCurrentCluster()
  if (cluster === null) {
    const context = kubeConfig.getCurrentContext()
    const invalid = invalidContexts.get(context)
    if (invalid !== undefined) throw new Error(invalid)
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

/** A copy of the kubeconfig whose current context is `name`; throws if it has no such context, or it is invalid. */
export function withContext({ config: kubeConfig, invalidContexts }: LoadedKubeConfig, name: string): LoadedKubeConfig {
  const invalid = invalidContexts.get(name)
  if (invalid !== undefined) throw new Error(invalid)
  if (kubeConfig.getContextObject(name) === null) {
    throw new Error(`the kubeconfig has no context "${name}" (it has: ${contextNames(kubeConfig).join(', ') || 'none'})`)
  }
  const copy = new KubeConfig()
  copy.loadFromOptions({ clusters: kubeConfig.getClusters(), users: kubeConfig.getUsers(), contexts: kubeConfig.getContexts(), currentContext: name })
  return { config: copy, invalidContexts }
}

/** The API server of the kubeconfig's current context. */
export const serverOf = (kubeConfig: KubeConfig): string => kubeConfig.getCurrentCluster()?.server ?? ''

/**
 * One line saying why a request to the cluster failed, for a person: the apiserver's own message
 * for an HTTP error, the network error (ECONNREFUSED, ENOTFOUND, a certificate problem) for a
 * connection that failed, and the deadline for one that took too long. One line whatever the
 * error: a credential plugin's failure is its standard error ("error: token expired\nrun: gcloud
 * auth login"), and a fleet audit prints one row a cluster. Cut at 1,000 characters, where
 * statusMessage cuts a Status message.
 */
export function describeClusterError(error: unknown, server: string, timeoutMs?: number): string {
  return `${server}: ${oneLine(whyFailed(error, timeoutMs), 1000)}`
}

function whyFailed(error: unknown, timeoutMs: number | undefined): string {
  if (error instanceof ApiException) {
    const body: unknown = error.body
    const text = typeof body === 'string' ? body : typeof body === 'object' && body !== null && 'message' in body && typeof body.message === 'string' ? body.message : ''
    const message = statusMessage(text)
    return `HTTP ${String(error.code)}${message === '' ? '' : `: ${message}`}`
  }
  if (error instanceof ListError && error.status !== undefined) {
    return `HTTP ${String(error.status)}${error.detail === undefined || error.detail === '' ? '' : `: ${error.detail}`}`
  }
  if (error instanceof Error && error.name === 'AbortError' && timeoutMs !== undefined) {
    return `no answer within ${String(timeoutMs / 1000)} s`
  }
  if (error instanceof Error) {
    // fetch wraps the network error: "fetch failed", cause { code: 'ECONNREFUSED', message }.
    const cause = error.cause
    const detail = cause instanceof Error ? (('code' in cause && typeof cause.code === 'string' ? `${cause.code}: ` : '') + cause.message) : error.message
    return error.message === 'fetch failed' ? `cannot connect: ${detail}` : detail
  }
  return String(error)
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
