// What a command does I/O with, passed in so that tests run commands in-process and capture their
// output and exit code. processIO() is the real thing; main.ts is the only caller.

import type { KubeConfig } from '@kubernetes/client-node'
import { readFile } from 'node:fs/promises'
import type { ClusterState } from '../policy/state.ts'
import { contextNames, describeClusterError, readKubeConfig, requireCluster, serverOf, withContext } from '../cluster/kube.ts'
import { applyClusterPolicyReport } from '../cluster/reports.ts'
import { readClusterSnapshot } from '../cluster/snapshot.ts'
import { exitCodes } from './errors.ts'

/** A cluster to read: a kubeconfig (default: in-cluster, else $KUBECONFIG or ~/.kube/config) and one of its contexts. */
export interface ClusterTarget {
  readonly kubeconfig: string | undefined
  /** undefined: the kubeconfig's current context. */
  readonly context: string | undefined
  /** Every request to the cluster is abandoned after this long. */
  readonly timeoutMs: number
}

/** A cluster that could not be read or written: the message says which and why, in one line. */
export class ClusterAccessError extends Error {
  override name = 'ClusterAccessError'
}

export interface KubeconfigContext {
  readonly name: string
  readonly server: string
  /** Why the context cannot be used; it has no server then. */
  readonly invalid?: string
}

export interface CommandIO {
  readonly stdout: (text: string) => void
  readonly stderr: (text: string) => void
  /** The text of a file named on the command line; `-` is standard input. */
  readonly readFile: (path: string) => Promise<string>
  /** The live cluster's ServiceCIDRs and IPAddresses (audit without --cluster); throws ClusterAccessError. */
  readonly readCluster: (target: ClusterTarget) => Promise<ClusterState>
  /** Server-side applies a ClusterPolicyReport (audit --apply); throws ClusterAccessError. */
  readonly applyReport: (target: ClusterTarget, report: { metadata: { name: string } }) => Promise<void>
  /**
   * The contexts of a kubeconfig and their API servers (audit --all-contexts), then those it has
   * that are invalid, with why (a context with no cluster); throws on an unreadable kubeconfig.
   */
  readonly contexts: (kubeconfig: string | undefined) => readonly KubeconfigContext[]
  /** The time, for the timestamps of reports. */
  readonly now: () => Date
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = []
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks).toString('utf8')
}

/** Rejects once the signal aborts, with its reason: for abort() without one, a DOMException named AbortError. */
function aborted(signal: AbortSignal): Promise<never> {
  return new Promise((_resolve, reject) => {
    signal.addEventListener('abort', () => { reject(signal.reason as DOMException) }, { once: true })
  })
}

/**
 * Runs `call` against the target's cluster with a deadline; any failure becomes a ClusterAccessError.
 * The signal aborts requests only: client-node runs a kubeconfig's credential plugin
 * (users[].user.exec) before each request and does not take a signal, so a plugin that waits (for
 * a login, say) would hold the cluster, and a fleet audit, past its deadline. The call is raced
 * against the deadline instead; what it still has running is left to end on its own.
 */
async function withCluster<T>(target: ClusterTarget, call: (kubeConfig: KubeConfig, signal: AbortSignal) => Promise<T>): Promise<T> {
  let kubeConfig
  try {
    const loaded = readKubeConfig(target.kubeconfig)
    kubeConfig = requireCluster(target.context === undefined ? loaded : withContext(loaded, target.context), target.kubeconfig)
  } catch (error) {
    throw new ClusterAccessError(error instanceof Error ? error.message : String(error), { cause: error })
  }
  const controller = new AbortController()
  const timer = setTimeout(() => {
    controller.abort()
  }, target.timeoutMs)
  try {
    return await Promise.race([call(kubeConfig, controller.signal), aborted(controller.signal)])
  } catch (error) {
    throw new ClusterAccessError(describeClusterError(error, serverOf(kubeConfig), target.timeoutMs), { cause: error })
  } finally {
    clearTimeout(timer)
  }
}

/**
 * A failed write to standard output (a full disk, a reader gone: `| head`) ends the run with exit 2
 * and one line, never a stack trace: exit 1 would read as "a request denied". A reader that went
 * away on purpose (EPIPE) gets no message; standard error has nowhere to report its own failures.
 */
function onOutputErrors(): void {
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') process.stderr.write(`servicecidr-guard: cannot write standard output: ${error.message}\n`)
    process.exit(exitCodes.usage)
  })
  process.stderr.on('error', () => undefined)
}

export function processIO(): CommandIO {
  onOutputErrors()
  // Standard input can be read once; a second `-` gets the same text.
  let stdin: Promise<string> | undefined
  return {
    stdout: (text) => process.stdout.write(text),
    stderr: (text) => process.stderr.write(text),
    readFile: (path) => (path === '-' ? (stdin ??= readStdin()) : readFile(path, 'utf8')),
    readCluster: (target) => withCluster(target, readClusterSnapshot),
    applyReport: (target, report) => withCluster(target, (kubeConfig, signal) => applyClusterPolicyReport(kubeConfig, report, signal)),
    contexts: (kubeconfig) => {
      // A fleet's kubeconfig needs no current context: each context is read on its own.
      const loaded = readKubeConfig(kubeconfig)
      return [
        ...contextNames(loaded.config).map((name) => ({ name, server: serverOf(withContext(loaded, name).config) })),
        ...[...loaded.invalidContexts].map(([name, invalid]) => ({ name, server: '', invalid })),
      ]
    },
    now: () => new Date(),
  }
}

/** What a command is built with: its I/O, and where its action leaves the exit code. */
export interface CommandContext {
  readonly io: CommandIO
  exitCode: number
}
