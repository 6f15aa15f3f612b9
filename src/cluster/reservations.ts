// Reservations every replica sees: the one serialisation point that keeps two replicas from each
// admitting one of two overlapping ServiceCIDRs created at the same moment.
//
// Each admitted range is written into one Lease (an annotation holding a JSON list) with a PUT whose
// resourceVersion is the version the decision was checked against. kube-apiserver accepts only one
// write per version, so of two overlapping admissions the later write must have been checked against
// a version that holds the earlier one: on 409 Conflict the Lease is read again and the request
// decided again, with what it now holds, up to a bound of attempts and within a deadline.
//
// A replica writes one batch at a time (everything that queued while the previous write was in
// flight, or, for the first write, in the same turn of the event loop), so it never conflicts with
// itself; within a batch no two ranges overlap, because each was first reserved in this replica's
// own model synchronously. The last Lease seen (from this replica's own GET or PUT) is kept, so a
// lone writer needs one PUT, not GET and PUT; if another replica wrote meanwhile, the PUT conflicts
// and the Lease is read again.
//
// That saving must not starve another replica. One whose PUT lost must read before it writes again
// (two round trips); one that keeps writing from its kept copy needs one, so while it has a batch
// queued at every turn it wins every race, and the other fails closed once its attempts run out
// (seen in 09-replicas on kind: 10 conflicts in a row). So a replica writing again less than one
// write's time after its last write (it is streaming) reads first. Its writes are then two round
// trips apart, and the other's GET and PUT, one round trip apart, fall between two of them about
// half the time, whichever lost last. It does not pause as a conflict does: a lone busy replica
// (no one to make room for) would otherwise idle half its time (2.9k reviews/s instead of 5.8k in
// bench/server.ts with the in-memory Lease).
//
// Entries leave the Lease only when their TTL has passed (each write prunes the expired). Each
// replica stops counting an entry as soon as its own watch shows the ServiceCIDR
// (src/policy/reservations.ts); removing the entry from the Lease at that moment would let a replica
// whose watch lags behind see neither the object nor the entry, and admit an overlapping range.

import { holdsCIDRs } from '../policy/state.ts'
import type { LeaseObject, LeaseStore, StoreErrorKind } from './lease.ts'
import { StoreError } from './lease.ts'

export const reservationsAnnotation = 'servicecidr-guard.dev/reservations'

export interface Reservation {
  readonly name: string
  /** The CIDRs the admitted request adds (all of a CREATE's; the new family of an UPDATE's). */
  readonly cidrs: readonly string[]
  /** When it ends, in ms since the epoch by the clock of the replica that wrote it. */
  readonly expiresAt: number
  readonly replica: string
  /** The AdmissionReview's uid, to find the review in the logs. */
  readonly uid: string
}

export interface ReserveRequest {
  readonly name: string
  readonly cidrs: readonly string[]
  readonly uid: string
}

/**
 * Why a reservation could not be recorded: the StoreError kinds, plus conflicts beyond the bound,
 * the deadline, a Lease too full to take more, and a bug (internal).
 */
export type FailureReason = Exclude<StoreErrorKind, 'conflict' | 'timeout'> | 'conflicts' | 'deadline' | 'full' | 'internal'

export type ReserveResult =
  | { readonly outcome: 'recorded' }
  /** Decided again with the Lease's reservations, the request is no longer admitted. */
  | { readonly outcome: 'refused' }
  | { readonly outcome: 'failed', readonly reason: FailureReason, readonly detail: string }

/**
 * Decides the request again with the reservations the Lease holds (expired ones left out); true if
 * it is still admitted. Called once per attempt: after a conflict the Lease may hold more.
 */
export type Recheck = (held: readonly Reservation[]) => boolean

/** Counters the server exports; every callback is optional. */
export interface ReservationEvents {
  settled?(outcome: 'recorded' | 'refused' | FailureReason, seconds: number): void
  write?(result: 'written' | 'conflict' | 'error'): void
  /** Reservations this replica wrote whose ServiceCIDR the watch never showed before they expired. */
  expiredUnseen?(count: number): void
}

export interface SharedReservationsOptions {
  readonly store: LeaseStore
  /** Who writes, for people reading the Lease: pod name and process. */
  readonly replica: string
  readonly ttlMs: number
  /** A review waits at most this long for its reservation, queue and retries included. */
  readonly deadlineMs: number
  /** Writes tried per batch before failing closed (default 20); the deadline bounds them too. */
  readonly maxAttempts?: number
  readonly maxEntries?: number
  /** The most bytes the annotation may take (default 200 KiB): see maxAnnotationBytes. */
  readonly maxBytes?: number
  readonly now?: () => number
  readonly log: { warn(object: object, message: string): void }
  readonly events?: ReservationEvents
}

/** A review waiting for its reservation: answered once, by SharedReservations.settle. */
class Waiter {
  settled = false
  readonly request: ReserveRequest
  readonly recheck: Recheck
  readonly startedAt: number
  readonly deadline: number
  /** When the deadline's timer answers it, by the monotonic clock (performance.now), which timers keep. */
  readonly dueAt: number
  readonly answer: (result: ReserveResult) => void

  constructor(request: ReserveRequest, recheck: Recheck, startedAt: number, deadline: number, dueAt: number, answer: (result: ReserveResult) => void) {
    this.request = request
    this.recheck = recheck
    this.startedAt = startedAt
    this.deadline = deadline
    this.dueAt = dueAt
    this.answer = answer
  }
}

interface WireEntry {
  name?: unknown
  cidrs?: unknown
  expires?: unknown
  replica?: unknown
  uid?: unknown
}

/** The annotation's JSON, read leniently: an entry that does not parse is dropped and counted. */
export function parseReservations(text: string | undefined): { entries: Reservation[], malformed: number } {
  if (text === undefined || text === '') return { entries: [], malformed: 0 }
  let raw: unknown
  try {
    raw = JSON.parse(text)
  } catch {
    return { entries: [], malformed: 1 }
  }
  if (!Array.isArray(raw)) return { entries: [], malformed: 1 }
  const entries: Reservation[] = []
  let malformed = 0
  for (const item of raw as (WireEntry | null)[]) {
    // An entry that is not an object (null, a number, a string) is malformed like any other: read as
    // one, `null.expires` threw, and every write after it failed until the replica restarted.
    if (typeof item !== 'object' || item === null) {
      malformed++
      continue
    }
    const expiresAt = typeof item.expires === 'string' ? Date.parse(item.expires) : Number.NaN
    const cidrs = Array.isArray(item.cidrs) && item.cidrs.every((cidr) => typeof cidr === 'string') ? item.cidrs : undefined
    if (typeof item.name !== 'string' || item.name === '' || cidrs === undefined || Number.isNaN(expiresAt)) {
      malformed++
      continue
    }
    entries.push({ name: item.name, cidrs, expiresAt, replica: typeof item.replica === 'string' ? item.replica : '', uid: typeof item.uid === 'string' ? item.uid : '' })
  }
  return { entries, malformed }
}

interface Range {
  readonly name: string
  readonly cidrs: readonly string[]
}

/** Whether two reservations are the same: one name, and the same CIDRs in any order. */
function sameRange(a: Range, b: Range): boolean {
  if (a.name !== b.name || a.cidrs.length !== b.cidrs.length) return false
  // A loop rather than every: a write compares every entry it holds, and a closure a call was garbage.
  for (const cidr of a.cidrs) {
    if (!b.cidrs.includes(cidr)) return false
  }
  return true
}

/** A reservation's identity as a key: its name and its CIDRs, in any order. */
function rangeKey({ name, cidrs }: Range): string {
  return cidrs.length === 1 ? `${name} ${cidrs[0] ?? ''}` : `${name} ${[...cidrs].sort().join(' ')}`
}

/** The latest time a Date holds (ECMA-262, "Time Values and Time Range"). */
const maxTime = 8.64e15

/** The second of the last time formatted, and its text up to the milliseconds ("2026-12-06T04:20:07."). */
let formattedSecond = Number.NaN
let formattedPrefix = ''

/**
 * `ms` as Date#toISOString writes it, which is what Date.parse reads back. Every write formats its
 * entries' expiry, and toISOString was half the cost of formatting an entry: the text up to the
 * second is kept, so within a second only the milliseconds are written.
 */
export function isoTime(ms: number): string {
  // The last second Date holds has one millisecond in range: toISOString throws for the others.
  if (ms > maxTime) return new Date(ms).toISOString()
  const second = Math.floor(ms / 1000)
  if (second !== formattedSecond) {
    // Throws, as toISOString does, for what is not a time (NaN, or beyond Date's range).
    const text = new Date(second * 1000).toISOString()
    formattedSecond = second
    formattedPrefix = text.slice(0, -4)
  }
  const millis = ms - second * 1000
  return `${formattedPrefix}${millis < 10 ? '00' : millis < 100 ? '0' : ''}${String(millis)}Z`
}

export function formatReservations(entries: readonly Reservation[]): string {
  return JSON.stringify(entries.map(({ name, cidrs, expiresAt, replica, uid }) => ({ name, cidrs, expires: isoTime(expiresAt), replica, uid })))
}

/**
 * The store's answer, or a timeout: the store aborts its own requests at `ms`, and this bounds a store
 * that would not, so one hung call can never hold this replica's queue of reviews.
 */
function within<T>(call: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => { reject(new StoreError('timeout', `no answer within ${String(ms)} ms`)) }, ms)
    // One reaction for both the answer and the timer: a write is made for every batch. A rejection
    // that is not an Error (no store makes one) is passed on wrapped in one.
    call.then((value) => {
      clearTimeout(timer)
      resolve(value)
    }, (error: unknown) => {
      clearTimeout(timer)
      reject(error instanceof Error ? error : new Error(String(error)))
    })
  })
}

/**
 * Up to 10 ms, at random, before reading the Lease again (client-go's retry.RetryOnConflict backs off
 * 10 ms with jitter): two replicas racing do not stay in step.
 */
const retryPause = (): Promise<void> => new Promise((resolve) => { setTimeout(resolve, Math.random() * 10) })

/** The pauses before trying again after kube-apiserver could not be reached or answered 429/5xx. */
const outagePausesMs = [50, 100, 200, 400]

/**
 * kube-apiserver refuses an object whose annotations, keys and values, exceed 256 KiB
 * (ValidateAnnotationsSize, k8s.io/apimachinery/pkg/api/validation/objectmeta.go) with a 422. The
 * reservations stay below that with room for the Lease's other annotations (kubectl's
 * last-applied-configuration), so a Lease too full to take more fails as 'full', saying so, not as
 * an update kube-apiserver rejected. 1,000 entries of ServiceCIDR names of 253 characters would
 * take ~500 KB: the entry cap alone does not keep it there.
 */
export const maxAnnotationBytes = 200 * 1024

const recorded: ReserveResult = Object.freeze({ outcome: 'recorded' })
const refused: ReserveResult = Object.freeze({ outcome: 'refused' })

/** The items `keep` accepts: `items` itself when it accepts all (the usual case here), not a copy. */
function kept<T>(items: readonly T[], keep: (item: T) => boolean): readonly T[] {
  return items.every(keep) ? items : items.filter(keep)
}

const unanswered = (waiter: Waiter): boolean => !waiter.settled

/** The entries that have not expired by `now`: `entries` itself when none has (as kept answers, without a closure made for every write). */
function unexpired(entries: readonly Reservation[], now: number): readonly Reservation[] {
  for (const entry of entries) {
    if (entry.expiresAt <= now) return entries.filter((held) => held.expiresAt > now)
  }
  return entries
}

/** The index in `entries` of the same range as `range`, or -1. */
function indexOfRange(entries: readonly Range[], range: Range): number {
  for (let index = 0; index < entries.length; index++) {
    if (sameRange(entries[index] as Range, range)) return index
  }
  return -1
}

function withAnnotation(lease: LeaseObject, text: string): LeaseObject {
  return { ...lease, metadata: { ...lease.metadata, annotations: { ...lease.metadata?.annotations, [reservationsAnnotation]: text } } }
}

export class SharedReservations {
  private readonly options: SharedReservationsOptions
  private readonly now: () => number
  private readonly maxAttempts: number
  private readonly maxEntries: number
  private readonly maxBytes: number
  private queue: Waiter[] = []
  /**
   * Every review not yet answered, in the order it came, which is the order of the deadlines (all
   * are deadlineMs long), behind those answered since the last trim (before `first`). One timer
   * serves them all, set for the first one's deadline: a timer per review, set and cleared, cost
   * more than the queue itself.
   */
  private pending: Waiter[] = []
  private first = 0
  private deadlineTimer: NodeJS.Timeout | undefined
  /** A drain is scheduled or running: what queues meanwhile goes in its next batch. */
  private draining = false
  /** The Lease as this replica last read or wrote it. */
  private cached: LeaseObject | undefined
  /** When this replica's last successful write ended, and how long it took (ms, by `now`). */
  private lastWrite: { readonly end: number, readonly took: number } | undefined
  /**
   * The reservations annotation last parsed, and what it parsed to. A lone writer's next write
   * starts from the annotation it wrote itself: it is not parsed again for every admitted CREATE.
   */
  private parsed: { readonly text: string | undefined, readonly entries: readonly Reservation[], readonly malformed: number } | undefined
  /** What this replica wrote, by rangeKey, until the watch shows the ServiceCIDR or the reservation expires. */
  private readonly tracked = new Map<string, { readonly name: string, readonly cidrs: readonly string[], readonly expiresAt: number }>()
  /** No tracked reservation expires before this: sweep() has nothing to do until then. */
  private sweepAt = Number.POSITIVE_INFINITY
  lastError: string | undefined

  constructor(options: SharedReservationsOptions) {
    this.options = options
    this.now = options.now ?? Date.now
    this.maxAttempts = options.maxAttempts ?? 20
    this.maxEntries = options.maxEntries ?? 1000
    this.maxBytes = options.maxBytes ?? maxAnnotationBytes
  }

  get where(): string {
    return this.options.store.where
  }

  /**
   * Records the request's range in the Lease, deciding it again with what the Lease holds. Never
   * rejects: it answers within the deadline, with the reason if it could not record.
   */
  reserve(request: ReserveRequest, recheck: Recheck): Promise<ReserveResult> {
    const startedAt = this.now()
    this.sweep(startedAt)
    const { deadlineMs } = this.options
    const { promise, resolve } = Promise.withResolvers<ReserveResult>()
    const waiter = new Waiter(request, recheck, startedAt, startedAt + deadlineMs, performance.now() + deadlineMs, resolve)
    // A write still in flight at the deadline may yet succeed: the review has been answered by
    // then, and the entry expires like any other whose ServiceCIDR never appears.
    if (this.deadlineTimer === undefined) this.deadlineTimer = setTimeout(this.expireDue, deadlineMs)
    // Only a pending review keeps the process alive, as it did with a timer of its own.
    else if (this.pending.length === this.first) this.deadlineTimer.ref()
    this.pending.push(waiter)
    this.queue.push(waiter)
    if (!this.draining) {
      this.draining = true
      // The first write of a drain starts once this turn of the event loop has run its I/O
      // callbacks, so that reviews whose requests arrived together go in one write, not the
      // first alone and the rest in the next.
      setImmediate(this.startDrain)
    }
    return promise
  }

  /** Answers a review once (the first answer wins), and counts it. */
  private settle(waiter: Waiter, result: ReserveResult): void {
    if (waiter.settled) return
    waiter.settled = true
    this.trim()
    // Answered before it is counted: a metric that throws must not cost the review its answer, nor,
    // from the deadline's timer or a batch's failure, the process.
    waiter.answer(result)
    try {
      this.options.events?.settled?.(result.outcome === 'failed' ? result.reason : result.outcome, (this.now() - waiter.startedAt) / 1000)
    } catch (error) {
      this.options.log.warn({ err: error }, 'counting a settled reservation failed')
    }
  }

  private readonly startDrain = (): void => {
    void this.drain()
  }

  /** Drops the answered reviews from the front of `pending`, so that its first is the next deadline. */
  private trim(): void {
    const { pending } = this
    let { first } = this
    while (first < pending.length && pending[first]?.settled === true) first++
    if (first === pending.length) {
      pending.length = 0
      this.first = 0
      // Left set, for the next review: it fires at worst once, early, and sets itself again.
      this.deadlineTimer?.unref()
      return
    }
    // Compacted once answered reviews fill more than half the array: a copy never moves more than it drops.
    if (first > 1024 && first * 2 > pending.length) {
      this.pending = pending.slice(first)
      first = 0
    }
    this.first = first
  }

  /** The deadline timer: answers every review whose deadline has come, then waits for the next. */
  private readonly expireDue = (): void => {
    this.deadlineTimer = undefined
    const now = performance.now()
    const detail = `recording it in Lease ${this.where} took longer than ${String(this.options.deadlineMs / 1000)} s`
    // settle() trims, so the first in `pending` is always the next unanswered review. Timers round
    // to the millisecond: one due within it is due.
    for (let waiter = this.pending[this.first]; waiter !== undefined && waiter.dueAt <= now + 1; waiter = this.pending[this.first]) {
      this.settle(waiter, { outcome: 'failed', reason: 'deadline', detail })
    }
    const next = this.pending[this.first]
    if (next !== undefined) this.deadlineTimer = setTimeout(this.expireDue, Math.max(1, next.dueAt - now))
  }

  /** The watch shows a ServiceCIDR: a reservation of ours for it has done its job. */
  observe(record: { readonly name: string, readonly cidrs: readonly { readonly text: string }[] }): void {
    if (this.tracked.size === 0) return
    for (const [key, entry] of this.tracked) {
      if (entry.name === record.name && holdsCIDRs(record, entry.cidrs)) this.tracked.delete(key)
    }
  }

  /** Counts (and forgets) reservations of ours that expired without their ServiceCIDR appearing. */
  sweep(now = this.now()): number {
    // Called for every reservation: it walks what is tracked only once something can have expired.
    if (now < this.sweepAt) return 0
    let expired = 0
    this.sweepAt = Number.POSITIVE_INFINITY
    for (const [key, entry] of this.tracked) {
      if (entry.expiresAt > now) {
        this.sweepAt = Math.min(this.sweepAt, entry.expiresAt)
        continue
      }
      this.tracked.delete(key)
      expired++
    }
    if (expired > 0) this.options.events?.expiredUnseen?.(expired)
    return expired
  }

  /** Reads the Lease once, so a missing Lease or RBAC is reported at start-up, not at the first CREATE. */
  async probe(): Promise<string | undefined> {
    try {
      const lease = await within(this.options.store.get(this.options.deadlineMs), this.options.deadlineMs)
      // A write that ended while this read was on its way left a newer copy: keeping the older one
      // would make the next write conflict with this replica's own.
      this.cached ??= lease
      this.lastError = undefined
    } catch (error) {
      this.lastError = error instanceof Error ? error.message : String(error)
    }
    return this.lastError
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const batch = this.queue
        this.queue = []
        try {
          await this.write(batch)
        } catch (error) {
          // A bug must not leave a review waiting: it is answered, failing closed. The copy of the
          // Lease it came from is dropped, so the next write reads the Lease again instead of
          // meeting the same copy, and the same failure, until the replica restarts.
          this.cached = undefined
          this.parsed = undefined
          this.options.log.warn({ err: error }, 'shared reservation failed unexpectedly')
          this.fail(batch, 'internal', `an internal error (${error instanceof Error ? error.message : String(error)})`)
        }
      }
    } finally {
      this.draining = false
    }
  }

  private fail(waiters: readonly Waiter[], reason: FailureReason, detail: string): void {
    this.lastError = detail
    for (const waiter of waiters) this.settle(waiter, { outcome: 'failed', reason, detail })
  }

  private failed(waiters: readonly Waiter[], error: unknown): void {
    if (!(error instanceof StoreError)) throw error
    const { where } = this
    switch (error.kind) {
      case 'missing':
        this.fail(waiters, 'missing', `the Lease ${where} does not exist (it comes with the webhook's manifests; apply them again)`)
        return
      case 'forbidden':
        this.fail(waiters, 'forbidden', `the webhook may not read or update the Lease ${where} (${error.message}); its Role grants get and update on that Lease`)
        return
      case 'rejected':
        this.fail(waiters, 'rejected', `kube-apiserver refused the update of the Lease ${where}: ${error.message}`)
        return
      case 'timeout':
        this.fail(waiters, 'deadline', `kube-apiserver did not answer in time: ${error.message}`)
        return
      case 'unavailable':
      case 'conflict':
        this.fail(waiters, 'unavailable', `kube-apiserver could not be reached: ${error.message}`)
    }
  }

  private entriesOf(lease: LeaseObject): { readonly entries: readonly Reservation[], readonly malformed: number } {
    const text = lease.metadata?.annotations?.[reservationsAnnotation]
    if (this.parsed?.text !== text || this.parsed === undefined) this.parsed = { text, ...parseReservations(text) }
    return this.parsed
  }

  /** The latest deadline of `waiters` less now: how long a call made for them may take (at least 1 ms). */
  private remaining(waiters: readonly Waiter[]): number {
    let latest = 0
    for (const waiter of waiters) latest = Math.max(latest, waiter.deadline)
    return Math.max(1, latest - this.now())
  }

  /**
   * After kube-apiserver could not be reached or answered 429/5xx: waits (50, 100, 200, then 400 ms)
   * and answers true to try again, while the reviews' deadline leaves room for the wait. A
   * connection reset, an apiserver behind the Service going away, or API Priority and Fairness
   * throttling for a moment is ridden out instead of refusing the CREATE at once. A write that
   * failed so may yet have been stored: trying again reads the Lease first, where this replica's
   * own entries then stand for the same requests, and writes them again.
   */
  private async rideOut(waiters: readonly Waiter[], error: unknown, outages: number): Promise<boolean> {
    const pauseMs = outagePausesMs[outages - 1]
    if (!(error instanceof StoreError) || error.kind !== 'unavailable' || pauseMs === undefined || this.remaining(waiters) <= pauseMs) return false
    await new Promise((resolve) => { setTimeout(resolve, pauseMs) })
    return true
  }

  private async write(batch: readonly Waiter[]): Promise<void> {
    const { store, ttlMs } = this.options
    let waiting = batch
    let outages = 0
    for (let attempt = 1; ; attempt++) {
      waiting = kept(waiting, unanswered)
      if (waiting.length === 0) return
      if (attempt > this.maxAttempts) {
        this.fail(waiting, 'conflicts', `the Lease ${this.where} changed under it ${String(this.maxAttempts)} times in a row (other replicas writing)`)
        return
      }
      // Streaming (see the top of this file): read first.
      if (attempt === 1 && this.cached !== undefined && this.lastWrite !== undefined && this.now() - this.lastWrite.end < this.lastWrite.took) {
        this.cached = undefined
      }
      const timeoutMs = this.remaining(waiting)
      let lease = this.cached
      if (lease === undefined) {
        try {
          lease = await within(store.get(timeoutMs), timeoutMs)
        } catch (error) {
          if (await this.rideOut(waiting, error, ++outages)) continue
          this.failed(waiting, error)
          return
        }
        this.cached = lease
      }
      const now = this.now()
      const { entries, malformed } = this.entriesOf(lease)
      if (malformed > 0) this.options.log.warn({ lease: this.where, malformed }, 'reservations in the Lease that do not parse are dropped')
      const held = unexpired(entries, now)
      for (const waiter of waiting) {
        if (!waiter.settled && !waiter.recheck(held)) this.settle(waiter, refused)
      }
      const admitted = kept(waiting, unanswered)
      if (admitted.length === 0) return
      // A request retried under the same name with the same CIDRs replaces its earlier entry, in the
      // Lease and in this batch. One with other CIDRs is kept beside it, as in this replica's own
      // model (ClusterState.reserve): either request's object may be the one kube-apiserver
      // stores, so until the watch shows which, both ranges must count for every replica.
      // (Loops, not keys: a batch is a few requests, and a string key for every entry held cost
      // more than comparing them.)
      const mine: Reservation[] = []
      for (const { request } of admitted) {
        const entry = { name: request.name, cidrs: request.cidrs, expiresAt: now + ttlMs, replica: this.options.replica, uid: request.uid }
        const earlier = indexOfRange(mine, entry)
        if (earlier === -1) mine.push(entry)
        else mine[earlier] = entry
      }
      const next: Reservation[] = []
      for (const entry of held) if (indexOfRange(mine, entry) === -1) next.push(entry)
      for (const entry of mine) next.push(entry)
      if (next.length > this.maxEntries) {
        this.fail(admitted, 'full', `the Lease ${this.where} already holds ${String(next.length - mine.length)} reservations, the most it takes is ${String(this.maxEntries)}`)
        return
      }
      const text = formatReservations(next)
      const bytes = Buffer.byteLength(text)
      if (bytes > this.maxBytes) {
        this.fail(admitted, 'full', `the Lease ${this.where} already holds ${String(next.length - mine.length)} reservations; with this one they would take ${String(bytes)} bytes, the most its annotation takes is ${String(this.maxBytes)}`)
        return
      }
      const writeStart = this.now()
      const writeTimeoutMs = this.remaining(admitted)
      try {
        this.cached = await within(store.update(withAnnotation(lease, text), writeTimeoutMs), writeTimeoutMs)
        const end = this.now()
        this.lastWrite = { end, took: end - writeStart }
        // The next write starts from this one's entries: the text is not parsed back (were the
        // stored text to differ, entriesOf would parse it).
        this.parsed = { text, entries: next, malformed: 0 }
      } catch (error) {
        this.cached = undefined
        if (error instanceof StoreError && error.kind === 'conflict') {
          this.options.events?.write?.('conflict')
          waiting = admitted
          // Another replica wrote in between: read again after a short random pause, so that two
          // replicas retrying do not stay in step.
          await retryPause()
          continue
        }
        this.options.events?.write?.('error')
        waiting = admitted
        if (await this.rideOut(admitted, error, ++outages)) continue
        this.failed(admitted, error)
        return
      }
      this.options.events?.write?.('written')
      this.lastError = undefined
      for (const entry of mine) this.tracked.set(rangeKey(entry), entry)
      this.sweepAt = Math.min(this.sweepAt, now + ttlMs)
      for (const waiter of admitted) this.settle(waiter, recorded)
      return
    }
  }
}
