// The server's logger: whole lines, gathered and written 64 KiB at a time, none lost at close or
// at exit.

import t from 'tap'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { LineBatch, lineLogger } from '../../../src/cli/logger.ts'
import type { DecisionLine } from '../../../src/server/app.ts'

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

t.test('decisions: writes what logger.info(line, \'review\') writes, byte for byte but the time, and nothing below its level', (t) => {
  const admitted: DecisionLine = { uid: 'uid-1', user: 'alice', operation: 'CREATE', resource: 'ServiceCIDR', name: 'extra', cidrs: ['34.118.224.0/24'], verdict: 'allowed', reason: undefined, rules: [], warnings: undefined, dryRun: false, reservation: 'recorded', durationMs: 0.123 }
  const lines: [string, DecisionLine][] = [
    ['admitted', admitted],
    ['denied, with a reason and rules', { ...admitted, verdict: 'denied', reason: 'ServiceCIDR "extra" overlaps ServiceCIDR "kubernetes" (10.96.0.0/28); pick a free range such as 34.118.225.0/24', rules: ['Overlap', 'AllowedRanges'], reservation: undefined }],
    ['a Service, with warnings', { ...admitted, resource: 'Service', name: 'team-a/web', cidrs: undefined, warnings: ['range 10.96.0.0/28 is 93% full'] }],
    // pino escapes a short string itself and a long one with JSON.stringify: both kinds, with quotes,
    // backslashes, control characters and characters beyond ASCII.
    ['strings to escape', { ...admitted, uid: 'a"b\\c\nd\u0001é😀\u2028', name: `${'x'.repeat(60)}"\t\\é` }],
    ['user and dryRun unknown (a body that did not decode)', { ...admitted, user: undefined, name: undefined, cidrs: undefined, rules: undefined, dryRun: undefined, verdict: 'error', reason: 'SCG_INVALID_JSON' }],
  ]
  for (const level of ['info', 'debug']) {
    const written: string[] = []
    const { logger, decisions } = lineLogger(level, { write: (text: string) => { written.push(text) } })
    for (const [name, line] of lines) {
      logger.info(line, 'review')
      decisions(line)
      const [byPino, byWriter] = written.splice(0).map((text) => text.replace(/"time":\d+,/, '"time":0,'))
      t.equal(byWriter, byPino, `${level}: ${name}`)
    }
  }
  const written: string[] = []
  const { decisions } = lineLogger('warn', { write: (text: string) => { written.push(text) } })
  decisions(admitted)
  t.same(written, [], 'at level warn: no line')
  t.end()
})
