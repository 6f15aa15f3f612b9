// The server's logger: whole lines, gathered and written 16 KiB at a time, none lost at close or
// at exit.

import t from 'tap'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { LineBatch } from '../../../src/cli/logger.ts'

t.test('LineBatch: holds lines until minLength characters, then writes them as one chunk; flush writes the rest', (t) => {
  const written: string[] = []
  const batch = new LineBatch({ write: (text: string) => { written.push(text) } }, 10)
  batch.write('abcd\n')
  t.same(written, [], 'under minLength: held')
  batch.write('efgh\n')
  t.same(written, ['abcd\nefgh\n'], 'at minLength: one write, the lines in order')
  batch.write('ij\n')
  batch.flush()
  batch.flush()
  t.same(written, ['abcd\nefgh\n', 'ij\n'], 'flush writes what is held, once')
  t.end()
})

t.test('serverLogger: every line reaches the file, after close() and when the process exits without it', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'scg-logger-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  const logger = new URL('../../../src/cli/logger.ts', import.meta.url).href
  for (const [name, ending] of [['close', 'close(); setTimeout(() => undefined, 200)'], ['exit', 'setTimeout(() => process.exit(0), 200)']] as const) {
    const file = join(dir, `${name}.log`)
    const script = join(dir, `${name}.ts`)
    writeFileSync(script, `import { serverLogger } from ${JSON.stringify(logger)}
const { logger, close } = serverLogger('info', ${JSON.stringify(file)})
for (let i = 0; i < 1000; i++) logger.info({ i }, 'line')
${ending}
`)
    const run = spawnSync(process.execPath, [script], { encoding: 'utf8' })
    t.equal(run.status, 0, `${name}: ${run.stderr}`)
    const lines = readFileSync(file, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as { i: number, msg: string })
    t.same(lines.map((line) => line.i), Array.from({ length: 1000 }, (_, i) => i), `${name}: 1,000 lines, in order, none lost`)
    t.equal(lines[0]?.msg, 'line')
  }
  t.end()
})
