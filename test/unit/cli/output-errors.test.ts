// A run whose standard output cannot be written ends with exit 2 and one line, never a stack trace
// and never exit 1, which `check` uses for "a request denied".

import t from 'tap'
import { spawn, spawnSync } from 'node:child_process'
import { openSync, closeSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const main = fileURLToPath(new URL('../../../src/main.ts', import.meta.url))
const policy = fileURLToPath(new URL('../../../config/policies/generic.yaml', import.meta.url))

t.test('a full disk: exit 2 and the reason on standard error', (t) => {
  const full = openSync('/dev/full', 'w')
  t.teardown(() => { closeSync(full) })
  const run = spawnSync(process.execPath, [main, 'plan', '--policy', policy, '--size', '100'], { stdio: ['ignore', full, 'pipe'], encoding: 'utf8' })
  t.equal(run.status, 2)
  t.equal(run.stderr, 'servicecidr-guard: cannot write standard output: ENOSPC: no space left on device, write\n')
  t.end()
})

t.test('a reader that went away (| head): exit 2, nothing on standard error', async (t) => {
  const child = spawn(process.execPath, [main, 'check', '--help'], { stdio: ['ignore', 'pipe', 'pipe'] })
  child.stdout.destroy()
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  const status = await new Promise<number | null>((resolve) => child.on('close', resolve))
  t.equal(status, 2)
  t.equal(stderr, '')
})
