// The local control plane of hack/local/up.sh: processes on 127.0.0.1 described by $LOCAL_DIR/env,
// controlled with hack/local/ctl.sh (which reuses each component's recorded command line). The
// webhook is WEBHOOK_REPLICAS processes or containers (webhook-1, webhook-2, ...) behind a round
// robin, all started with the same policy file; each has its own health port (WEBHOOK_HEALTH_PORTS).

import { execFile } from 'node:child_process'
import { readFileSync, realpathSync, renameSync, writeFileSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { dirname, join, relative } from 'node:path'
import { promisify } from 'node:util'
import { readEnvFile } from '../lib/env-file.ts'
import { Cluster } from '../lib/kube.ts'
import { poll } from '../lib/wait.ts'
import { httpGet } from './http.ts'
import { auditEventsOn, type AuditEvent, type Harness, type WebhookReadiness } from './types.ts'

const run = promisify(execFile)

export function localDir(repoRoot: string): string {
  return process.env['LOCAL_DIR'] ?? join(repoRoot, '.local')
}

export class LocalHarness implements Harness {
  readonly name = 'local'
  readonly replicas = undefined
  readonly kubeconfigPath: string
  readonly kubectl: string
  readonly cluster: Cluster
  private readonly env: Record<string, string>
  private readonly repoRoot: string
  private readonly dir: string

  constructor(repoRoot: string) {
    this.repoRoot = repoRoot
    this.dir = localDir(repoRoot)
    this.env = readEnvFile(join(this.dir, 'env'))
    this.kubeconfigPath = this.need('KUBECONFIG')
    this.kubectl = this.need('KUBECTL')
    this.cluster = Cluster.fromFile(this.kubeconfigPath)
  }

  private need(key: string): string {
    const value = this.env[key]
    if (!value) throw new Error(`${key} is missing from ${join(this.dir, 'env')}`)
    return value
  }

  /** Each replica's health endpoint, replica 1 first. */
  private get healthURLs(): string[] {
    const ports = this.env['WEBHOOK_HEALTH_PORTS'] || this.need('WEBHOOK_HEALTH_PORT')
    return ports.split(',').map((port) => `http://127.0.0.1:${port}`)
  }

  private async ctl(action: 'stop' | 'start' | 'restart', component: string): Promise<void> {
    try {
      await run(join(this.repoRoot, 'hack/local/ctl.sh'), [action, component], { env: { ...process.env, LOCAL_DIR: this.dir }, timeout: 180_000 })
    } catch (error) {
      const { stderr } = error as { stderr?: string }
      throw new Error(`hack/local/ctl.sh ${action} ${component} failed: ${stderr ?? String(error)}`, { cause: error })
    }
  }

  async stopWebhook(): Promise<void> {
    await this.ctl('stop', 'webhook')
  }

  async startWebhook(): Promise<void> {
    await this.ctl('start', 'webhook')
  }

  async restartApiserver(): Promise<void> {
    await this.ctl('restart', 'apiserver')
    await this.cluster.waitApiserverReady()
  }

  /**
   * The policy file the webhook replicas read (every replica has the same), on this machine:
   * WEBHOOK_POLICY in $LOCAL_DIR/env (with WEBHOOK=image, the copy in the folder mounted into the
   * containers), else the --policy argument of replica 1's recorded command line.
   */
  policyPath(): string {
    const fromEnv = this.env['WEBHOOK_POLICY']
    if (fromEnv) return fromEnv
    const file = join(this.dir, 'cmd/webhook-1')
    const argv = readFileSync(file, 'utf8').split('\0')
    const at = argv.indexOf('--policy')
    const path = at >= 0 ? argv[at + 1] : undefined
    if (path === undefined) throw new Error(`no --policy in ${file}`)
    return path
  }

  /** A file git tracks is never rewritten: an interrupted spec would leave the repository changed. */
  private async refuseTracked(path: string): Promise<void> {
    const real = realpathSync(path)
    const inRepo = relative(realpathSync(this.repoRoot), real)
    if (inRepo.startsWith('..')) return
    const tracked = await run('git', ['-C', this.repoRoot, 'ls-files', '--error-unmatch', inRepo]).then(() => true, () => false)
    if (tracked) {
      throw new Error(
        `the webhook was started with the policy file ${path}, which git tracks; the suite rewrites the policy in force, ` +
          'so start the control plane with a copy: hack/local/e2e.sh does, or POLICY=/tmp/policy.yaml hack/local/up.sh',
      )
    }
  }

  async setPolicy(yaml: string): Promise<void> {
    const path = this.policyPath()
    if (readFileSync(path, 'utf8') === yaml) return
    await this.refuseTracked(path)
    const before = (await this.webhookReadiness()).map((entry) => entry.body.checks?.policy?.loadedAt)
    // Write then rename, so a replica (which re-reads the file every 2 s) never reads half a file.
    const temporary = join(dirname(path), `.policy-${process.pid}.tmp`)
    writeFileSync(temporary, yaml)
    renameSync(temporary, path)
    await poll(`every webhook replica to load the new policy (loadedAt was ${before.join(', ')})`, async () => {
      const now = await this.webhookReadiness()
      return now.length === before.length && now.every((entry, index) => {
        const policy = entry.body.checks?.policy
        if (policy?.lastError !== undefined) throw new Error(`webhook replica ${String(index + 1)} refused the policy: ${policy.lastError}`)
        return policy?.loadedAt !== undefined && policy.loadedAt !== before[index] && policy.valid === true
      })
    }, { timeoutMs: 20_000 })
  }

  webhookReadiness(): Promise<WebhookReadiness[]> {
    return Promise.all(this.healthURLs.map(async (url) => {
      const response = await httpGet(`${url}/readyz`)
      return { status: response.status, body: JSON.parse(response.text) as WebhookReadiness['body'] }
    }))
  }

  webhookMetrics(): Promise<string[]> {
    return Promise.all(this.healthURLs.map(async (url) => {
      const response = await httpGet(`${url}/metrics`)
      if (response.status !== 200) throw new Error(`GET ${url}/metrics: HTTP ${response.status}`)
      return response.text
    }))
  }

  sharedReservation(): Promise<boolean> {
    return Promise.resolve(this.env['SHARED_RESERVATION'] !== '0')
  }

  /** From the audit log hack/local/up.sh has kube-apiserver write: one JSON event a line. */
  async apiserverAuditEvents(name: string): Promise<readonly AuditEvent[]> {
    const text = await readFile(this.need('APISERVER_AUDIT_LOG'), 'utf8')
    return auditEventsOn(name, text)
  }

  describe(): Record<string, string> {
    return {
      target: 'local',
      kubeVersion: this.env['KUBE_VERSION'] ?? '',
      etcdVersion: this.env['ETCD_VERSION'] ?? '',
      serviceCIDR: this.env['SERVICE_CIDR'] ?? '',
      policy: this.policyPath(),
      webhook: this.env['WEBHOOK_IMAGE'] ? `image ${this.env['WEBHOOK_IMAGE']}` : 'local process',
      webhookReplicas: this.env['WEBHOOK_REPLICAS'] ?? '1',
      sharedReservation: this.env['SHARED_RESERVATION'] ?? '1',
    }
  }
}
