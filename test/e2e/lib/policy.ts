// Variants of the baseline policy for the specs that change what is in force (expansion, Warn, Audit).
// The YAML document is edited in place, so its comments and every other field stay as they are.

import { parseDocument } from 'yaml'
import { baselinePolicy } from '../harness/index.ts'

export interface PolicyChanges {
  readonly overlap?: 'Deny' | 'AllowExpansion' | 'Allow'
  readonly enforcement?: 'Deny' | 'Warn' | 'Audit'
}

export function policyWith(changes: PolicyChanges): string {
  const document = parseDocument(baselinePolicy())
  for (const [key, value] of Object.entries(changes)) document.setIn(['spec', key], value)
  return document.toString()
}
