// What a command does I/O with, passed in so that tests run commands in-process and capture their
// output and exit code. processIO() is the real thing; main.ts is the only caller.

import { readFile } from 'node:fs/promises'
import type { ClusterState } from '../policy/state.ts'
import { loadKubeConfig } from '../cluster/kube.ts'
import { readClusterSnapshot } from '../cluster/snapshot.ts'

export interface CommandIO {
  readonly stdout: (text: string) => void
  readonly stderr: (text: string) => void
  /** The text of a file named on the command line; `-` is standard input. */
  readonly readFile: (path: string) => Promise<string>
  /** The live cluster's ServiceCIDRs and IPAddresses (audit without --cluster). */
  readonly readCluster: (kubeconfig: string | undefined) => Promise<ClusterState>
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = []
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks).toString('utf8')
}

export function processIO(): CommandIO {
  // Standard input can be read once; a second `-` gets the same text.
  let stdin: Promise<string> | undefined
  return {
    stdout: (text) => process.stdout.write(text),
    stderr: (text) => process.stderr.write(text),
    readFile: (path) => (path === '-' ? (stdin ??= readStdin()) : readFile(path, 'utf8')),
    readCluster: (kubeconfig) => readClusterSnapshot(loadKubeConfig(kubeconfig)),
  }
}

/** What a command is built with: its I/O, and where its action leaves the exit code. */
export interface CommandContext {
  readonly io: CommandIO
  exitCode: number
}
