// Which spec files a run covers: every *.test.ts in test/e2e, or the ones E2E_SPECS names (a subset
// run, such as `make e2e-race-off`). The runner starts exactly these; the summary expects exactly them.

import { readdirSync } from 'node:fs'
import { specDir } from './paths.ts'

/** E2E_SPECS as file names ("09-replicas" is 09-replicas.test.ts), or undefined for the whole suite. */
export function selectedFiles(): string[] | undefined {
  const names = (process.env['E2E_SPECS'] ?? '').split(/[\s,]+/).filter((name) => name !== '')
  return names.length === 0 ? undefined : names.map((name) => name.endsWith('.test.ts') ? name : `${name}.test.ts`).sort()
}

/** The spec files of this run, in name order. A named file that does not exist is an error, never a smaller run. */
export function runFiles(): string[] {
  const all = readdirSync(specDir).filter((name) => name.endsWith('.test.ts')).sort()
  const selected = selectedFiles()
  if (selected === undefined) return all
  const unknown = selected.filter((name) => !all.includes(name))
  if (unknown.length > 0) throw new Error(`E2E_SPECS names spec files that do not exist: ${unknown.join(', ')}`)
  return selected
}
