// Reading what the command line names: the policy, cluster files and manifests. Every problem is a
// UsageError (exit 2) whose message names the file.

import { parsePolicy } from '../config/policy.ts'
import { buildClusterState, describeReadError, readManifests, readObjects, type FileObjects, type Located } from '../cluster/files.ts'
import type { ClusterState } from '../policy/state.ts'
import type { Policy, UserInfo } from '../policy/types.ts'
import { UsageError } from './errors.ts'
import type { CommandIO } from './io.ts'

/** The name a file goes by in messages: standard input has none of its own. */
export const displayName = (path: string): string => (path === '-' ? '(stdin)' : path)

export async function readText(io: CommandIO, path: string, what: string): Promise<string> {
  try {
    return await io.readFile(path)
  } catch (error) {
    throw new UsageError(`cannot read ${what} ${displayName(path)}: ${describeReadError(error)}`)
  }
}

/** The policy file; a PolicyError (exit 2) lists every problem in it. */
export async function loadPolicy(io: CommandIO, path: string): Promise<Policy> {
  return parsePolicy(await readText(io, path, 'policy file'), displayName(path))
}

async function loadObjects(io: CommandIO, paths: readonly string[], what: string): Promise<FileObjects[]> {
  const files: FileObjects[] = []
  for (const path of paths) {
    const read = readObjects(await readText(io, path, what), displayName(path))
    if (!read.ok) throw new UsageError(read.error)
    files.push(read.value)
  }
  return files
}

/** The cluster as --cluster files describe it; no files: an empty cluster. */
export async function loadCluster(io: CommandIO, paths: readonly string[]): Promise<ClusterState> {
  const built = buildClusterState(await loadObjects(io, paths, 'cluster file'))
  if (!built.ok) throw new UsageError(built.error)
  return built.value
}

export async function loadManifests(io: CommandIO, paths: readonly string[]): Promise<readonly Located[]> {
  const read = readManifests(await loadObjects(io, paths, 'manifest'))
  if (!read.ok) throw new UsageError(read.error)
  return read.value
}

/**
 * The user a review is made as: by default `servicecidr-guard:<command>` with no groups, whom no
 * sensible policy exempts, so that exemptions apply only when --as and --as-group name a user.
 */
export function reviewUser(command: string, as: string | undefined, groups: readonly string[]): UserInfo {
  return { username: as ?? `servicecidr-guard:${command}`, groups: [...groups] }
}

/**
 * The longest time a flag takes, in seconds: Node's timers fire at once for more than 2^31 - 1 ms
 * (24.8 days, with a TimeoutOverflowWarning), which would turn a timeout of ~25 days into 1 ms.
 */
export const maxSeconds = 86_400

/** Commander's accumulator for repeatable options (`--cluster a --cluster b`); absent: undefined. */
export const repeatable = (value: string, previous: readonly string[] | undefined): string[] => [...(previous ?? []), value]
