// Runs the e2e suite (npm run test:e2e): tap runs the spec files, after test/e2e/before.ts starts a
// new run; then test/e2e/summary.ts runs in a tap run of its own. The summary must come after every
// spec file, and tap starts the files it is given in no fixed order (each waits on a stat() first),
// so a summary among them once ran before 12-policy-reports and found it missing.
// The summary runs whether or not a spec file failed: its record says which. The exit code is the
// spec files' if they failed, else the summary's.

import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { specDir } from './lib/paths.ts'
import { runFiles } from './lib/specs.ts'

const tap = ['--disable-coverage', '--timeout=900']

function run(args: readonly string[]): number {
  const result = spawnSync('tap', [...tap, ...args], { stdio: 'inherit' })
  if (result.error !== undefined) throw result.error
  return result.status ?? 1
}

const specs = run(['--jobs=1', `--before=${join(specDir, 'before.ts')}`, ...runFiles().map((name) => join(specDir, name))])
const summary = run([join(specDir, 'summary.ts')])
process.exitCode = specs !== 0 ? specs : summary
