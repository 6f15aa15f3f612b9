// Reads the KEY=value file hack/local/up.sh writes ($LOCAL_DIR/env). Values are bare, or quoted the
// way bash's printf %q quotes (backslash escapes, or $'...' for control characters).

import { readFileSync } from 'node:fs'

function unquote(value: string): string {
  if (value.startsWith('$\'') && value.endsWith('\'')) {
    return value.slice(2, -1).replace(/\\(.)/g, (_match, char: string) => ({ n: '\n', t: '\t', r: '\r' } as Record<string, string>)[char] ?? char)
  }
  if (value.startsWith('\'') && value.endsWith('\'')) return value.slice(1, -1)
  return value.replace(/\\(.)/g, '$1')
}

export function readEnvFile(path: string): Record<string, string> {
  const env: Record<string, string> = {}
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    const match = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line)
    if (match?.[1] !== undefined) env[match[1]] = unquote(match[2] ?? '')
  }
  return env
}
