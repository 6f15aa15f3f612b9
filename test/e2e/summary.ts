// Run after every spec file has ended, in a tap run of its own (test/e2e/run.ts): what the run
// measured and whether it covered what it had to.
// - kube-apiserver's own measure of the webhook, apiserver_admission_webhook_admission_duration_seconds
//   for name="validate.servicecidr-guard.dev", and the webhook's servicecidr_guard_decision_duration_seconds:
//   count, mean, and p50/p99 estimated from the buckets (as PromQL's histogram_quantile does). Restarts
//   reset a component's counters, so the snapshots the harness took just before each reset are added.
// - every other spec file reported for this run, none failed, and every requirement in E2E_REQUIRE
//   was covered.
// Written to .e2e/summary.json (E2E_SUMMARY overrides) for CI to read; printed as comments.

import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import t from 'tap'
import { openHarness } from './harness/index.ts'
import { webhookName } from './lib/kube.ts'
import { resultsDir, runFile, snapshotsDir, summaryPath } from './lib/paths.ts'
import { histogram, mergeHistograms, parseSamples, summarize, type Histogram, type LatencySummary } from './lib/prom.ts'
import { currentRunId, required, SpecFile, type FileReport } from './lib/report.ts'
import { runFiles, selectedFiles } from './lib/specs.ts'

const file = new SpecFile(t, import.meta.url)
const harness = openHarness()

function snapshots(kind: 'apiserver' | 'webhook'): string[] {
  if (!existsSync(snapshotsDir)) return []
  return readdirSync(snapshotsDir).filter((name) => name.startsWith(`${kind}-`)).map((name) => readFileSync(join(snapshotsDir, name), 'utf8'))
}

function total(texts: readonly string[], name: string, match: Record<string, string> = {}): Histogram {
  return mergeHistograms(texts.map((text) => histogram(parseSamples(text), name, match)))
}

const format = (summary: LatencySummary): string =>
  `${String(summary.count)} observations, mean ${String(summary.meanMs ?? '-')} ms, p50 ~${String(summary.p50Ms ?? '-')} ms, p99 ~${String(summary.p99Ms ?? '-')} ms`

let metrics: Record<string, LatencySummary> = {}
const byOperation: Record<string, LatencySummary> = {}

await file.spec('latency: kube-apiserver\'s measure of the webhook, and the webhook\'s own decision time', async (t) => {
  const apiserverTexts = [...snapshots('apiserver'), await harness.apiserverMetrics()]
  const webhookTexts = [...snapshots('webhook'), ...(await harness.webhookMetrics())]
  const admission = summarize(total(apiserverTexts, 'apiserver_admission_webhook_admission_duration_seconds', { name: webhookName }))
  const decision = summarize(total(webhookTexts, 'servicecidr_guard_decision_duration_seconds'))
  metrics = { apiserverAdmission: admission, webhookDecision: decision }
  for (const operation of ['CREATE', 'UPDATE', 'DELETE']) {
    const part = summarize(total(apiserverTexts, 'apiserver_admission_webhook_admission_duration_seconds', { name: webhookName, operation }))
    if (part.count > 0) byOperation[operation] = part
  }
  t.comment(`kube-apiserver -> webhook round trip (apiserver_admission_webhook_admission_duration_seconds{name="${webhookName}"}): ${format(admission)}`)
  for (const [operation, part] of Object.entries(byOperation)) t.comment(`  ${operation}: ${format(part)}`)
  t.comment(`webhook decision (servicecidr_guard_decision_duration_seconds): ${format(decision)}`)
  t.comment(`(snapshots before resets: ${String(apiserverTexts.length - 1)} of kube-apiserver, ${String(snapshots('webhook').length)} of the webhook)`)
  t.ok(admission.count > 0, 'kube-apiserver called the webhook during the run')
  t.ok(decision.count > 0, 'the webhook decided reviews during the run')
})

await file.spec('coverage: every spec file reported for this run, none failed, every required item covered', (t) => {
  const runId = currentRunId()
  const expected = runFiles()
  const reports: FileReport[] = []
  const missing: string[] = []
  for (const name of expected) {
    const path = join(resultsDir, `${name}.json`)
    const report = existsSync(path) ? JSON.parse(readFileSync(path, 'utf8')) as FileReport : undefined
    if (report?.runId !== runId) missing.push(name)
    else reports.push(report)
  }
  t.same(missing, [], `every spec file reported for run ${runId} (${String(expected.length)} files)`)
  t.ok(expected.length > 0, 'there are spec files to report')
  for (const report of reports) {
    t.ok(report.ok, `${report.file}: ${String(report.counts.passed)} passed, ${String(report.counts.failed)} failed, ${String(report.counts.skipped)} not applied`)
    t.ok(report.counts.run > 0, `${report.file}: ran specs`)
  }
  const requirements = reports.flatMap((report) => report.requirements)
  for (const name of required()) {
    t.ok(requirements.some((entry) => entry.name === name && entry.applied), `E2E_REQUIRE ${name}: covered by this run`)
  }
  const notApplied = requirements.filter((entry) => !entry.applied)
  for (const entry of notApplied) t.comment(`not applied: ${entry.name}: ${entry.reason}${entry.required ? ' (REQUIRED)' : ''}`)

  // This file's own record so far (its latency spec); its verdict on coverage is `ok` below.
  reports.push(file.report())
  const run = JSON.parse(readFileSync(runFile, 'utf8')) as { startedAt: string }
  const finishedAt = new Date()
  const summary = {
    runId,
    startedAt: run.startedAt,
    finishedAt: finishedAt.toISOString(),
    durationMs: finishedAt.getTime() - new Date(run.startedAt).getTime(),
    target: harness.describe(),
    required: required(),
    selected: selectedFiles() ?? null,
    ok: missing.length === 0 && reports.every((report) => report.ok && report.counts.run > 0) && required().every((name) => requirements.some((entry) => entry.name === name && entry.applied)),
    missing,
    files: reports.map(({ file: name, durationMs, counts, specs, requirements: covered, measurements, ok }) => ({ file: name, ok, durationMs, ...counts, specs, requirements: covered, measurements })),
    notApplied,
    latency: { ...metrics, apiserverAdmissionByOperation: byOperation },
  }
  mkdirSync(dirname(summaryPath), { recursive: true })
  writeFileSync(summaryPath, `${JSON.stringify(summary, null, 2)}\n`)
  t.comment(`suite: ${(summary.durationMs / 1000).toFixed(1)} s from the first spec file to this one; summary written to ${summaryPath}`)
  for (const entry of summary.files) {
    t.comment(`  ${entry.file}: ${entry.ok ? 'ok' : 'FAILED'}, ${String(entry.passed)}/${String(entry.run)} specs passed, ${String(entry.skipped)} not applied, ${(entry.durationMs / 1000).toFixed(1)} s`)
    for (const [name, value] of Object.entries(entry.measurements)) t.comment(`    ${name}: ${JSON.stringify(value)}`)
  }
  t.ok(summary.ok, 'the run is complete')
  t.end()
})
