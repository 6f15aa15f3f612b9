// The command line as a whole: help on every command, version, and usage errors that exit 2
// without calling process.exit (which would end this test process).

import t from 'tap'
import { run } from '../../helpers/cli.ts'

t.test('--help works on the program and on every command, exit 0', async (t) => {
  for (const command of [[], ['serve'], ['check'], ['audit'], ['plan'], ['generate'], ['generate', 'vap']]) {
    const { code, stdout, stderr } = await run([...command, '--help'])
    t.equal(code, 0, `${command.join(' ') || 'program'} --help`)
    t.match(stdout, `Usage: servicecidr-guard ${command.join(' ')}`.trimEnd())
    t.equal(stderr, '')
  }
  const { code, stdout } = await run(['help', 'plan'])
  t.equal(code, 0)
  t.match(stdout, 'Usage: servicecidr-guard plan')
})

t.test('--version prints the version', async (t) => {
  const { code, stdout } = await run(['--version'])
  t.equal(code, 0)
  t.equal(stdout, '0.0.0-test\n')
})

t.test('usage errors exit 2, also inside subcommands that commander did not create', async (t) => {
  const unknownCommand = await run(['frobnicate'])
  t.equal(unknownCommand.code, 2)
  t.match(unknownCommand.stderr, "error: unknown command 'frobnicate'")
  // serve is added with addCommand: without the inherited exit override, commander would have
  // called process.exit(1) here.
  const serve = await run(['serve', '--port', 'many'])
  t.equal(serve.code, 2)
  t.match(serve.stderr, /^error: option '--port <port>' argument 'many' is invalid\. must be a port number \(0-65535\)\n\(run with --help for usage\)\n$/)
  // generate vap is a subcommand of a subcommand: it needs the override too.
  const vap = await run(['generate', 'vap'])
  t.equal(vap.code, 2)
  t.match(vap.stderr, "error: required option '--policy <file>' not specified")
  const none = await run([])
  t.equal(none.code, 2, 'no command: help on stderr, exit 2')
  t.match(none.stderr, 'Usage: servicecidr-guard')
})
