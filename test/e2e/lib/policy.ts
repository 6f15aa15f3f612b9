// Variants of the baseline policy for the specs that change what is in force (expansion, Warn, Audit,
// a spec's own ranges).
// The YAML document is edited in place, so its comments and every other field stay as they are.

import { parseDocument } from 'yaml'
import { baselinePolicy } from '../harness/index.ts'

export interface PolicyChanges {
  readonly overlap?: 'Deny' | 'AllowExpansion' | 'Allow'
  readonly enforcement?: 'Deny' | 'Warn' | 'Audit'
  readonly allowedRanges?: readonly string[]
  readonly prefixLength?: { readonly ipv4?: { readonly min: number, readonly max: number }, readonly ipv6?: { readonly min: number, readonly max: number } }
}

export function policyWith(changes: PolicyChanges): string {
  const document = parseDocument(baselinePolicy())
  for (const [key, value] of Object.entries(changes)) document.setIn(['spec', key], value)
  return document.toString()
}
