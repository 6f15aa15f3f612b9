// The built command line (dist/main.js) run as a user runs it, on npm's Node 24: exit code and
// output, never a throw on a non-zero exit.

import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { repoRoot } from './paths.ts'

const run = promisify(execFile)

export interface CLIResult {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

export const mainPath = join(repoRoot, 'dist/main.js')

/** Builds dist/ if it is missing (hack/local/up.sh builds it; a run against another cluster may not). */
export async function ensureBuilt(): Promise<void> {
  if (!existsSync(mainPath)) await run('npm', ['run', '--silent', 'build'], { cwd: repoRoot, timeout: 300_000 })
}

export async function cli(args: readonly string[], options: { env?: NodeJS.ProcessEnv, timeoutMs?: number } = {}): Promise<CLIResult> {
  try {
    const { stdout, stderr } = await run(join(repoRoot, 'node_modules/.bin/node'), [mainPath, ...args], {
      timeout: options.timeoutMs ?? 120_000,
      maxBuffer: 64 << 20,
      env: options.env ?? process.env,
    })
    return { code: 0, stdout, stderr }
  } catch (error) {
    const { code, stdout, stderr } = error as { code?: unknown, stdout?: string, stderr?: string }
    if (typeof code !== 'number') throw new Error(`servicecidr-guard ${args.join(' ')}: ${String(error)}`, { cause: error })
    return { code, stdout: stdout ?? '', stderr: stderr ?? '' }
  }
}
