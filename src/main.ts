#!/usr/bin/env node
// The only module with side effects at start-up: run the command line and set the exit code.

import { createRequire } from 'node:module'
import { processIO } from './cli/io.ts'
import { runCli } from './cli/program.ts'

const { version } = createRequire(import.meta.url)('../package.json') as { version: string }

process.exitCode = await runCli(process.argv.slice(2), processIO(), version)
