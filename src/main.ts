#!/usr/bin/env node
// The only module with side effects at start-up: run the command line and set the exit code.

import { createRequire } from 'node:module'
import { CommanderError } from 'commander'
import { exitCodes } from './cli/errors.ts'
import { buildProgram } from './cli/program.ts'

const { version } = createRequire(import.meta.url)('../package.json') as { version: string }

const program = buildProgram(version).exitOverride()
try {
  await program.parseAsync(process.argv)
} catch (error) {
  if (error instanceof CommanderError) {
    // --help and --version end here too, with exit code 0.
    process.exitCode = error.exitCode === 0 ? exitCodes.ok : exitCodes.usage
  } else {
    process.stderr.write(`servicecidr-guard: ${error instanceof Error ? error.message : String(error)}\n`)
    process.exitCode = exitCodes.usage
  }
}
