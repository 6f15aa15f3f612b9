// The built command line (dist/main.js) run as a user runs it, on npm's Node 24: exit code and
// output, never a throw on a non-zero exit.

import { execFile } from 'node:child_process'
import { existsSync, readdirSync, statSync } from 'node:fs'
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

/**
 * Builds dist/ if it is missing or older than a file in src/: hack/local/up.sh builds it for local
 * processes, but a run with WEBHOOK=image, on kind or against another cluster may not, and a stale
 * dist/ would test yesterday's command line.
 */
export async function ensureBuilt(): Promise<void> {
  if (existsSync(mainPath) && statSync(mainPath).mtimeMs >= newestSource()) return
  await run('npm', ['run', '--silent', 'build'], { cwd: repoRoot, timeout: 300_000 })
}

/** The newest modification time of the files under src/. */
function newestSource(): number {
  const src = join(repoRoot, 'src')
  return readdirSync(src, { recursive: true, encoding: 'utf8' })
    .reduce((newest, name) => Math.max(newest, statSync(join(src, name)).mtimeMs), 0)
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
