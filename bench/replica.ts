// A webhook replica as the Deployment runs it, for the benchmarks that need a whole process: the
// built `serve` command (dist/main.js, as in the image) of a checkout, with the NODE_OPTIONS of
// config/manager/manager.yaml and the node flags of the Dockerfile's ENTRYPOINT, on loopback. The
// checkout is this repository or an older commit unpacked by checkoutOf(), so that one script
// measures both side by side.

import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdirSync, openSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { loadAll } from 'js-yaml'

export const repo = join(import.meta.dirname, '..')

/** NODE_OPTIONS of the webhook container in a checkout's config/manager/manager.yaml, so the two cannot drift. */
export function deploymentNodeOptions(checkout: string): string {
  const docs = loadAll(readFileSync(join(checkout, 'config/manager/manager.yaml'), 'utf8'))
  const deployment = docs.find((doc): doc is { spec: { template: { spec: { containers: { env?: { name: string, value?: string }[] }[] } } } } =>
    typeof doc === 'object' && doc !== null && (doc as { kind?: string }).kind === 'Deployment')
  const value = deployment?.spec.template.spec.containers[0]?.env?.find((env) => env.name === 'NODE_OPTIONS')?.value
  if (value === undefined) throw new Error('config/manager/manager.yaml sets no NODE_OPTIONS')
  return value
}

/**
 * The node flags of the image's ENTRYPOINT in a checkout's Dockerfile (V8 flags that NODE_OPTIONS
 * does not accept, such as --no-parallel-scavenge), so that a benchmark's servers run as the
 * container does; none for a checkout from before there were any.
 */
export function imageNodeFlags(checkout: string): string[] {
  const line = readFileSync(join(checkout, 'Dockerfile'), 'utf8').split('\n').find((text) => text.startsWith('ENTRYPOINT '))
  if (line === undefined) throw new Error(`${checkout}/Dockerfile has no ENTRYPOINT`)
  const entrypoint = JSON.parse(line.slice('ENTRYPOINT '.length)) as string[]
  return entrypoint.slice(1).filter((arg) => arg.startsWith('--'))
}

/**
 * A checkout to run: this repository for `current`, else the commit unpacked (git archive) under
 * `dir`, sharing this repository's node_modules. Either way built with tsc, as the image is.
 */
export function checkoutOf(ref: string, dir: string): string {
  let root = repo
  if (ref !== 'current') {
    const commit = execFileSync('git', ['rev-parse', '--verify', `${ref}^{commit}`], { cwd: repo, encoding: 'utf8' }).trim()
    root = join(dir, `checkout-${commit.slice(0, 12)}`)
    if (!existsSync(join(root, 'package.json'))) {
      rmSync(root, { recursive: true, force: true })
      mkdirSync(root, { recursive: true })
      execFileSync('tar', ['-x', '-C', root], { input: execFileSync('git', ['archive', commit], { cwd: repo, maxBuffer: 1 << 30 }) })
      symlinkSync(join(repo, 'node_modules'), join(root, 'node_modules'))
    }
  }
  execFileSync(process.execPath, [join(repo, 'node_modules/typescript/bin/tsc'), '-p', join(root, 'tsconfig.build.json')], { cwd: root, stdio: 'inherit' })
  return root
}

/**
 * The shared reservation Lease (issue 9) the bench's replicas record admitted ranges in: serve does
 * so by default, and outside a Pod it must be told where the Lease is.
 */
export const benchLease = 'scg-bench/servicecidr-guard-reservations'

/** Whether a checkout's serve records admitted ranges in a shared Lease (builds from before issue 9 do not). */
function sharesReservations(checkout: string): boolean {
  return existsSync(join(checkout, 'src/cluster/reservations.ts'))
}

/** Creates the namespace and the Lease of benchLease in the local control plane of `local` (LOCAL_DIR), if missing. */
export function ensureBenchLease(local: string): void {
  const kubectl = /^KUBECTL=(.*)$/m.exec(readFileSync(join(local, 'env'), 'utf8'))?.[1]
  if (kubectl === undefined) throw new Error(`${local}/env names no KUBECTL`)
  const [namespace, name] = benchLease.split('/')
  const objects = {
    apiVersion: 'v1',
    kind: 'List',
    items: [
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } },
      { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name, namespace }, spec: {} },
    ],
  }
  execFileSync(kubectl, ['--kubeconfig', join(local, 'kubeconfig'), 'apply', '--server-side', '--field-manager=servicecidr-guard-bench', '-f', '-'], { input: JSON.stringify(objects), stdio: ['pipe', 'ignore', 'inherit'] })
}

/** A self-signed serving certificate for 127.0.0.1 (EC P-256, as cert-manager issues by default here). */
export function selfSignedCertificate(dir: string): { cert: string, key: string, ca: string } {
  const cert = join(dir, 'tls.crt')
  const key = join(dir, 'tls.key')
  if (!existsSync(cert)) {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=localhost',
      '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1', '-keyout', key, '-out', cert], { stdio: 'ignore' })
  }
  return { cert, key, ca: readFileSync(cert, 'utf8') }
}

/** A kubeconfig whose apiserver never answers: the replica serves, unready, deciding fail-closed. */
export function unreachableKubeconfig(dir: string): string {
  const file = join(dir, 'unreachable.kubeconfig')
  writeFileSync(file, 'apiVersion: v1\nkind: Config\nclusters: [{name: none, cluster: {server: "https://127.0.0.1:9", insecure-skip-tls-verify: true}}]\n' +
    'users: [{name: none, user: {}}]\ncontexts: [{name: none, context: {cluster: none, user: none}}]\ncurrent-context: none\n')
  return file
}

/** BENCH_PORT (and the ports after it) when set, else a port the kernel says is free. */
export async function freePort(offset: number): Promise<number> {
  const base = process.env['BENCH_PORT']
  if (base !== undefined) return Number(base) + offset
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => { resolve(typeof address === 'object' && address !== null ? address.port : 0) })
    })
  })
}

export interface ReplicaOptions {
  readonly checkout: string
  readonly cert: string
  readonly key: string
  readonly policy: string
  readonly kubeconfig: string
  readonly port: number
  readonly healthPort: number
  /** stdout and stderr of the replica go here. */
  readonly logFile: string
}

export interface Replica {
  readonly pid: number
  readonly process: ChildProcess
  readonly startedAt: number
  /** Resident set now and its peak so far (VmRSS, VmHWM of /proc/PID/status), in bytes. */
  memory(): { rss: number, peak: number } | undefined
  exited(): boolean
  stop(): Promise<void>
}

function procStatus(pid: number): { rss: number, peak: number } | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    const field = (name: string): number => Number(/^(\w+):\s+(\d+) kB$/m.exec(status.split('\n').find((line) => line.startsWith(`${name}:`)) ?? '')?.[2] ?? Number.NaN) * 1024
    return { rss: field('VmRSS'), peak: field('VmHWM') }
  } catch {
    return undefined
  }
}

export function startReplica(options: ReplicaOptions): Replica {
  const log = openSync(options.logFile, 'a')
  const startedAt = performance.now()
  // BENCH_NODE_ARGS: extra node flags for the replica, e.g. --cpu-prof --cpu-prof-dir=/tmp/prof.
  const nodeArgs = (process.env['BENCH_NODE_ARGS'] ?? '').split(' ').filter((arg) => arg !== '')
  const child = spawn(process.execPath, [
    ...imageNodeFlags(options.checkout),
    ...nodeArgs,
    join(options.checkout, 'dist/main.js'), 'serve',
    '--policy', options.policy, '--tls-cert', options.cert, '--tls-key', options.key,
    '--host', '127.0.0.1', '--port', String(options.port), '--health-port', String(options.healthPort),
    '--kubeconfig', options.kubeconfig, '--log-level', 'info', '--shutdown-delay', '0', '--shutdown-timeout', '5',
    ...(sharesReservations(options.checkout) ? ['--reservation-lease', benchLease] : []),
  ], { env: { ...process.env, NODE_OPTIONS: deploymentNodeOptions(options.checkout) }, stdio: ['ignore', log, log] })
  let exited = false
  const exit = new Promise<void>((resolve) => child.once('exit', () => { exited = true; resolve() }))
  return {
    pid: child.pid ?? 0,
    process: child,
    startedAt,
    memory: () => procStatus(child.pid ?? 0),
    exited: () => exited,
    stop: async () => {
      if (exited) return
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000)
      await exit
      clearTimeout(timer)
    },
  }
}

/** Polls `url` every `everyMs` until it answers `status`; resolves with the time it took from `since`. */
export async function waitFor(url: string, status: number, since: number, timeoutMs: number, everyMs = 20): Promise<number> {
  const deadline = performance.now() + timeoutMs
  while (performance.now() < deadline) {
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(1000) })
      await response.arrayBuffer()
      if (response.status === status) return performance.now() - since
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, everyMs))
  }
  throw new Error(`${url} did not answer ${status} within ${timeoutMs} ms`)
}

export const mib = (bytes: number): string => (bytes / 1024 / 1024).toFixed(1)

