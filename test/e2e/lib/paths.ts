// Where the suite keeps what outlives one spec process: the per-file results, metric snapshots taken
// before a restart resets a component's counters, and the summary. Outside .local/, which
// hack/local/down.sh removes.

import { join, resolve } from 'node:path'

export const repoRoot = resolve(import.meta.dirname, '../../..')
export const outputDir = resolve(process.env['E2E_OUTPUT_DIR'] ?? join(repoRoot, '.e2e'))
export const resultsDir = join(outputDir, 'results')
export const snapshotsDir = join(outputDir, 'metrics')
export const runFile = join(outputDir, 'run.json')
export const summaryPath = resolve(process.env['E2E_SUMMARY'] ?? join(outputDir, 'summary.json'))
export const specDir = resolve(import.meta.dirname, '..')
