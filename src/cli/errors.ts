// Exit codes shared by every command: 0 all admitted, 1 something denied, 2 usage, policy or input
// error (or the one cluster could not be read), 3 a fleet audit in which some cluster could not be
// read. Errors print one clear message, never a stack trace.

export const exitCodes = { ok: 0, denied: 1, usage: 2, unreadable: 3 } as const

export class UsageError extends Error {
  override name = 'UsageError'
}
