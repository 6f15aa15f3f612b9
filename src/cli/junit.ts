// JUnit XML, the report format CI systems display without plugins: GitLab (artifacts:reports:junit,
// in the merge request and pipeline), Jenkins (junit step), Azure Pipelines, CircleCI, Buildkite,
// TeamCity; GitHub Actions through a test-report action. Each reviewed request or audited object is a
// <testcase>; a denial is its <failure>, an unreadable cluster an <error>, an exemption <skipped>.
// The schema CI systems read is the Ant/Jenkins one (testsuites > testsuite > testcase). Pure.

export interface JUnitCase {
  readonly classname: string
  readonly name: string
  /** The file the case comes from (GitLab and others link to it). */
  readonly file?: string
  readonly failure?: { readonly type: string, readonly message: string, readonly text: string }
  readonly error?: { readonly type: string, readonly message: string }
  readonly skipped?: string
  readonly systemOut?: string
}

export interface JUnitSuite {
  readonly name: string
  readonly timestamp?: Date
  readonly cases: readonly JUnitCase[]
}

/** XML 1.0 text: the five entities escaped, characters XML cannot hold dropped. */
function xml(text: string): string {
  return text
    // eslint-disable-next-line no-control-regex -- exactly the characters XML 1.0 forbids
    .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/g, '')
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;')
    .replaceAll('\'', '&apos;')
}

const attributes = (values: Record<string, string | number | undefined>): string =>
  Object.entries(values)
    .filter((entry): entry is [string, string | number] => entry[1] !== undefined)
    .map(([key, value]) => ` ${key}="${xml(String(value))}"`)
    .join('')

function counts(cases: readonly JUnitCase[]): { tests: number, failures: number, errors: number, skipped: number } {
  return {
    tests: cases.length,
    failures: cases.filter((entry) => entry.failure !== undefined).length,
    errors: cases.filter((entry) => entry.error !== undefined).length,
    skipped: cases.filter((entry) => entry.skipped !== undefined).length,
  }
}

function testcase(entry: JUnitCase): string {
  const open = `    <testcase${attributes({ classname: entry.classname, name: entry.name, file: entry.file })}`
  const body = [
    ...(entry.failure === undefined ? [] : [`      <failure${attributes({ type: entry.failure.type, message: entry.failure.message })}>${xml(entry.failure.text)}</failure>`]),
    ...(entry.error === undefined ? [] : [`      <error${attributes({ type: entry.error.type, message: entry.error.message })}/>`]),
    ...(entry.skipped === undefined ? [] : [`      <skipped${attributes({ message: entry.skipped })}/>`]),
    ...(entry.systemOut === undefined ? [] : [`      <system-out>${xml(entry.systemOut)}</system-out>`]),
  ]
  return body.length === 0 ? `${open}/>` : [`${open}>`, ...body, '    </testcase>'].join('\n')
}

export function junitXML(name: string, suites: readonly JUnitSuite[]): string {
  const all = counts(suites.flatMap((suite) => suite.cases))
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites${attributes({ name, tests: all.tests, failures: all.failures, errors: all.errors, skipped: all.skipped })}>`,
    ...suites.flatMap((suite) => [
      `  <testsuite${attributes({ name: suite.name, ...counts(suite.cases), timestamp: suite.timestamp?.toISOString().replace(/\.\d{3}Z$/, '') })}>`,
      ...suite.cases.map(testcase),
      '  </testsuite>',
    ]),
    '</testsuites>',
    '',
  ].join('\n')
}
