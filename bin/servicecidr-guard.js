#!/usr/bin/env node
// The installed command (`servicecidr-guard`, and `kubectl-servicecidr_guard`, which kubectl runs as
// `kubectl servicecidr-guard`). Written to parse on any Node.js, so that an older one gets this
// sentence instead of a syntax error from the code it cannot run.
const [major] = process.versions.node.split('.').map(Number)
if (major < 24) {
  process.stderr.write(`servicecidr-guard needs Node.js 24 or later; this is Node.js ${process.version} (${process.execPath}). Install Node.js 24 LTS, or run the container image.\n`)
  process.exit(1)
}
await import('../dist/main.js')
