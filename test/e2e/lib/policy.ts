// Variants of the baseline policy for the specs that change what is in force (expansion, Warn, Audit,
// a spec's own ranges): the baseline document with the given fields of spec replaced. (Comments are
// not kept: the webhook reads only the fields.)

import { dump, load } from 'js-yaml'
import { baselinePolicy } from '../harness/index.ts'

export interface PolicyChanges {
  readonly overlap?: 'Deny' | 'AllowExpansion' | 'Allow'
  readonly enforcement?: 'Deny' | 'Warn' | 'Audit'
  readonly allowedRanges?: readonly string[]
  readonly prefixLength?: { readonly ipv4?: { readonly min: number, readonly max: number }, readonly ipv6?: { readonly min: number, readonly max: number } }
  readonly capacity?: { readonly warnWhenFreeBelow?: { readonly ipv4?: number, readonly ipv6?: number } }
}

export function policyWith(changes: PolicyChanges): string {
  const document = load(baselinePolicy()) as { spec?: Record<string, unknown> }
  return dump({ ...document, spec: { ...document.spec, ...changes } })
}
