// The shape of a refusal by the webhook as a client sees it through kube-apiserver.

import type { Test } from 'tap'
import { deniedPrefix, type APIFailure } from './kube.ts'

export interface ExpectedDenial {
  /** Fragments the message must contain, after the apiserver's prefix. */
  readonly includes: readonly (string | RegExp)[]
  /** The rule the webhook names as the cause (details.causes[].reason). */
  readonly rule?: string
}

/** Asserts HTTP 403, the apiserver's "admission webhook ... denied the request:" prefix and the message. */
export function assertDenied(t: Test, failed: APIFailure, expected: ExpectedDenial): string {
  const message = failed.status.message ?? ''
  t.equal(failed.code, 403, 'refused with HTTP 403 Forbidden')
  t.equal(failed.status.reason, 'Forbidden', 'Status reason Forbidden')
  t.ok(message.startsWith(deniedPrefix), `message starts with '${deniedPrefix}'`, { found: message })
  for (const fragment of expected.includes) {
    if (typeof fragment === 'string') t.ok(message.includes(fragment), `message names: ${fragment}`, { found: message })
    else t.match(message, fragment, `message matches ${String(fragment)}`)
  }
  if (expected.rule !== undefined) {
    const causes = failed.status.details?.causes?.map((cause) => cause.reason) ?? []
    t.ok(causes.includes(expected.rule), `details.causes names the rule ${expected.rule}`, { found: causes })
  }
  return message
}
