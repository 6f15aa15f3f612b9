// Run by tap once before the spec files (npm run test:e2e passes --before): starts a new run, so the
// summary never counts a result or a metrics snapshot left by an earlier one.

import { randomUUID } from 'node:crypto'
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { ensureBuilt } from './lib/cli.ts'
import { outputDir, resultsDir, runFile, snapshotsDir } from './lib/paths.ts'

rmSync(resultsDir, { recursive: true, force: true })
rmSync(snapshotsDir, { recursive: true, force: true })
mkdirSync(outputDir, { recursive: true })
writeFileSync(runFile, `${JSON.stringify({ runId: randomUUID(), startedAt: new Date().toISOString() }, null, 2)}\n`)
// The spec files run the command line from dist/: never a stale one.
await ensureBuilt()
