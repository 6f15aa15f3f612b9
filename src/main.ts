#!/usr/bin/env node
// The only module with side effects at start-up: run the command line, and exit with its exit code.
//
// Stack traces name src/*.ts lines: source maps are turned on for this project's own files, and
// only then is the rest imported. `--enable-source-maps` would also load the maps of everything in
// node_modules (@kubernetes/client-node ships one per generated file): ~60 MiB of RSS for nothing
// (docs/benchmarks.md, "Start-up").

import { createRequire, setSourceMapsSupport } from 'node:module'

setSourceMapsSupport(true, { nodeModules: false, generatedCode: false })
const { processIO } = await import('./cli/io.ts')
const { runCli } = await import('./cli/program.ts')

const { version } = createRequire(import.meta.url)('../package.json') as { version: string }

process.exitCode = await runCli(process.argv.slice(2), processIO(), version)

// The command is done, but the event loop may not be: a kubeconfig credential plugin given up at an
// audit's --timeout is a child process that keeps it alive until the plugin ends (`serve` returns
// only once shut down). What the command printed is written out first: on macOS a pipe is written
// asynchronously, and process.exit does not wait for it.
const written = (stream: NodeJS.WriteStream): Promise<void> => new Promise((resolve) => { stream.write('', () => { resolve() }) })
await Promise.all([written(process.stdout), written(process.stderr)])
process.exit()
