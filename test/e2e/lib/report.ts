// Each spec file records what it ran: every spec with its result and duration, and every requirement
// (such as "v1beta1") it could or could not apply. The record is written when the file ends, to
// .e2e/results/<file>.json; the summary (test/e2e/summary.ts, run after them) checks that every file reported and
// writes the summary a CI script reads.
//
// E2E_REQUIRE=v1beta1[,...] names requirements a run must cover: a spec file that cannot apply one
// then fails instead of recording it as not applicable.

import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { basename, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Test } from 'tap'
import { resultsDir, runFile } from './paths.ts'

export type SpecResult = 'passed' | 'failed' | 'skipped'

export interface SpecRecord {
  readonly name: string
  readonly result: SpecResult
  readonly durationMs: number
  readonly reason?: string
}

export interface RequirementRecord {
  readonly name: string
  readonly applied: boolean
  readonly required: boolean
  readonly reason: string
}

export interface FileReport {
  readonly file: string
  readonly runId: string
  readonly pid: number
  readonly startedAt: string
  readonly durationMs: number
  readonly specs: readonly SpecRecord[]
  readonly requirements: readonly RequirementRecord[]
  readonly counts: { readonly run: number, readonly passed: number, readonly failed: number, readonly skipped: number }
  /** Figures a spec file measured (counts, latencies), for the summary. */
  readonly measurements: Readonly<Record<string, unknown>>
  readonly ok: boolean
}

export function required(): string[] {
  return (process.env['E2E_REQUIRE'] ?? '').split(',').map((entry) => entry.trim()).filter((entry) => entry !== '')
}

/** The run this process belongs to, from the file test/e2e/before.ts writes when tap starts. */
export function currentRunId(): string {
  if (!existsSync(runFile)) return 'unknown'
  return (JSON.parse(readFileSync(runFile, 'utf8')) as { runId: string }).runId
}

export class SpecFile {
  readonly file: string
  private readonly t: Test
  private readonly startedAt = Date.now()
  private readonly specs: SpecRecord[] = []
  private readonly requirements: RequirementRecord[] = []
  private readonly measurements: Record<string, unknown> = {}

  constructor(t: Test, moduleURL: string) {
    this.t = t
    this.file = basename(fileURLToPath(moduleURL))
    t.teardown(() => {
      this.write()
    })
  }

  /** Runs one spec as a subtest and records its result and duration. */
  async spec(name: string, fn: (t: Test) => Promise<void> | void): Promise<boolean> {
    const started = performance.now()
    const results = await this.t.test(name, fn)
    const durationMs = Math.round(performance.now() - started)
    // A spec that asserted nothing (returned early, or its assertions sat in a callback that never
    // ran) is no proof: tap counts it ok, this record counts it failed.
    const empty = results !== null && results.ok && results.pass === 0
    if (empty) this.t.fail(`spec "${name}" made no assertion`)
    const result: SpecResult = results === null ? 'skipped' : results.ok && !empty ? 'passed' : 'failed'
    this.specs.push({ name, result, durationMs })
    return result === 'passed'
  }

  /** Records a spec that did not run, and why; it fails if the run requires what it needed. */
  async skip(name: string, requirement: string, reason: string): Promise<void> {
    this.requirement(requirement, false, reason)
    if (required().includes(requirement)) {
      await this.spec(name, (t) => {
        t.fail(`E2E_REQUIRE includes ${requirement}, but this run cannot cover it: ${reason}`)
        t.end()
      })
      return
    }
    this.t.comment(`NOT APPLIED: ${name}: ${reason} (requirement "${requirement}"; E2E_REQUIRE=${requirement} makes this a failure)`)
    this.specs.push({ name, result: 'skipped', durationMs: 0, reason })
  }

  /** Records whether a requirement was covered (skip() records the ones that were not). */
  requirement(name: string, applied: boolean, reason: string): void {
    this.requirements.push({ name, applied, required: required().includes(name), reason })
  }

  /** Records a figure this file measured; the summary lists them per file. */
  measure(name: string, value: unknown): void {
    this.measurements[name] = value
  }

  /** The record as it stands: what has run so far. */
  report(): FileReport {
    const counts = {
      run: this.specs.filter((entry) => entry.result !== 'skipped').length,
      passed: this.specs.filter((entry) => entry.result === 'passed').length,
      failed: this.specs.filter((entry) => entry.result === 'failed').length,
      skipped: this.specs.filter((entry) => entry.result === 'skipped').length,
    }
    return {
      file: this.file,
      runId: currentRunId(),
      pid: process.pid,
      startedAt: new Date(this.startedAt).toISOString(),
      durationMs: Date.now() - this.startedAt,
      specs: this.specs,
      requirements: this.requirements,
      counts,
      measurements: this.measurements,
      ok: counts.failed === 0 && this.requirements.every((entry) => entry.applied || !entry.required),
    }
  }

  private write(): void {
    mkdirSync(resultsDir, { recursive: true })
    writeFileSync(join(resultsDir, `${this.file}.json`), `${JSON.stringify(this.report(), null, 2)}\n`)
  }
}
