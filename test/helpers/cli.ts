// Runs the command line in-process, as main.ts does, with files read relative to the repository
// root (so output names them as written here) and standard input and the live cluster supplied.

import { readFile } from 'node:fs/promises'
import { resolve } from 'node:path'
import type { ClusterTarget, CommandIO } from '../../src/cli/io.ts'
import { runCli } from '../../src/cli/program.ts'
import type { ClusterState } from '../../src/policy/state.ts'

export const root = resolve(import.meta.dirname, '../..')

export interface Run {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
  /** The target of each live read, in the order made. */
  readonly liveReads: ClusterTarget[]
  /** The reports applied, with their targets. */
  readonly applied: { readonly target: ClusterTarget, readonly report: unknown }[]
}

export interface RunOptions {
  readonly stdin?: string
  /** What a live read of the cluster answers (audit without --cluster). */
  readonly live?: (target: ClusterTarget) => Promise<ClusterState>
  /** What applying a report answers; by default it succeeds. */
  readonly apply?: (target: ClusterTarget) => Promise<void>
  /** The kubeconfig's contexts and their servers. */
  readonly contexts?: readonly { name: string, server: string }[]
}

/** The time every report in these tests is made at. */
export const testNow = new Date('2026-11-30T12:00:00Z')

export async function run(args: readonly string[], options: RunOptions = {}): Promise<Run> {
  let stdout = ''
  let stderr = ''
  const liveReads: ClusterTarget[] = []
  const applied: { target: ClusterTarget, report: unknown }[] = []
  const io: CommandIO = {
    stdout: (text) => { stdout += text },
    stderr: (text) => { stderr += text },
    readFile: (path) => {
      if (path !== '-') return readFile(resolve(root, path), 'utf8')
      return options.stdin === undefined ? Promise.reject(new Error('no standard input in this test')) : Promise.resolve(options.stdin)
    },
    readCluster: (target) => {
      liveReads.push(target)
      return options.live === undefined ? Promise.reject(new Error('no live cluster in this test')) : options.live(target)
    },
    applyReport: async (target, report) => {
      await options.apply?.(target)
      applied.push({ target, report })
    },
    contexts: () => options.contexts ?? [],
    now: () => testNow,
  }
  const code = await runCli(args, io, '0.0.0-test')
  return { code, stdout, stderr, liveReads, applied }
}

export const fixture = {
  gkePolicy: 'test/fixtures/policies/gke-beta.yaml',
  genericPolicy: 'test/fixtures/policies/generic.json',
  invalidPolicy: 'test/fixtures/policies/invalid.yaml',
  gkeCluster: 'test/fixtures/clusters/gke.yaml',
  auditCluster: 'test/fixtures/clusters/audit.yaml',
  invalidCluster: 'test/fixtures/clusters/invalid-cidr.yaml',
  manifest: (name: string): string => `test/fixtures/manifests/${name}`,
}
