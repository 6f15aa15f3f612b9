// List, then watch from the list's resourceVersion; re-watch when a watch ends, re-list when the
// resourceVersion is too old (410 Gone) or kube-apiserver ends or refuses a watch with another
// error. The pattern of client-go's Reflector (k8s.io/client-go/tools/cache/reflector.go,
// ListAndWatch), feeding projected records to a sink.

import { Watch, type KubeConfig } from '@kubernetes/client-node'
import { setTimeout as delay } from 'node:timers/promises'
import type { ObjectLike } from '../policy/state.ts'
import { listAll, type Resource } from './api.ts'

export interface ReflectorSink<R> {
  /** Keeps what the cache needs of an object: a LIST's full objects never all exist at once. */
  project(item: ObjectLike): R | undefined
  /** The complete set, after a (re-)list. */
  replace(records: readonly R[]): void
  upsert(record: R): void
  remove(item: ObjectLike): void
}

/** The few logger methods used here; pino's logger fits. */
export interface Log {
  debug(object: object, message: string): void
  info(object: object, message: string): void
  warn(object: object, message: string): void
}

export interface ReflectorOptions<R> {
  readonly kubeConfig: KubeConfig
  readonly resource: Resource
  readonly sink: ReflectorSink<R>
  readonly log: Log
  readonly now: () => number
  /**
   * The server ends each watch after this long (timeoutSeconds), so that a quiet view is shown to be
   * current at least this often (see staleFor); a watch not ended within watchGraceMs after that is
   * taken for a dead connection and given up. Default 3 (see watchSecondsWithin in cache.ts).
   */
  readonly watchSeconds?: number
  readonly backoff?: { readonly initialMs: number, readonly maxMs: number }
  /** Called after each completed list, once the sink holds it and `synced` is true. */
  readonly onListed?: () => void
}

interface WatchEvent {
  type?: string
  object?: ObjectLike & { metadata?: { resourceVersion?: string }, code?: number, reason?: string, message?: string }
}

/**
 * How a watch failed: the HTTP status it was refused with, or the code of the ERROR event that
 * ended it; no status when there was no answer (wakeable reads it).
 */
class WatchError extends Error {
  readonly status: number | undefined

  constructor(message: string, status: number | undefined, cause?: unknown) {
    super(message, { cause })
    this.status = status
  }
}

class GoneError extends WatchError {}

/**
 * A watch ended by an ERROR event, or refused with a status, other than 410 (too old) and 429 (too
 * many requests): see watchError. For events, kube-apiserver turns every failure of its etcd watch
 * but compaction into one: a 500, or a 504 for a resourceVersion etcd has not reached
 * (transformErrorToEvent and startWatching, k8s.io/apiserver/pkg/storage/etcd3/watcher.go).
 * Watching again from the same resourceVersion can meet the same error every time, and the view
 * would never have a watch open again; a list starts from a new one. client-go does the same: its
 * Reflector.watch re-watches only after a 429 (and after a 500 within
 * MaxInternalErrorRetryDuration, zero by default) and otherwise returns from ListAndWatch, which
 * runs again, listing first, after its back-off (k8s.io/client-go/tools/cache/reflector.go).
 */
class RelistError extends WatchError {}

/**
 * A watch that ended within shortWatchMs with no event, not even a bookmark: client-go's
 * watchHandler takes it for a failure ("very short watch", k8s.io/client-go/tools/cache/reflector.go).
 * An apiserver or a proxy in front of it that closes every watch at once would otherwise get a new
 * one at once, a loop of requests (1,312 in 1.5 s against a stand-in), with the view counted current
 * though it shows nothing.
 */
class ShortWatchError extends Error {}

const shortWatchMs = 1000

/**
 * How long after its timeoutSeconds a watch may still be open before it is taken for a dead
 * connection (a half-open TCP connection: the apiserver or the path to it gone without a FIN or a
 * reset) and aborted. client-node's Watch would wait for 30 s of silence; meanwhile no event can
 * arrive, and the view would lag the cluster by that much.
 */
const watchGraceMs = 2000

/** How long a watch waits for its response to begin before it is given up and tried again. */
const watchHeadersMs = 10_000

/** The HTTP status client-node's Watch gives a refused request; undefined when there was no answer. */
function statusOf(error: unknown): number | undefined {
  const status = (error as { statusCode?: unknown }).statusCode
  return typeof status === 'number' ? status : undefined
}

/**
 * What a watch ended or refused with `status` calls for: a list at once (410), a watch again after
 * the back-off (429, or no status: the connection failed, the apiserver did not answer, and the
 * watch resumes where it ended), or a list after the back-off (any other status). client-go's
 * Reflector.watch decides the same for a refused request (isWatchErrorRetriable: only a refused
 * connection and a 429 are watched again) and for an ERROR event (see RelistError).
 */
function watchError(status: number | undefined, message: string, cause?: unknown): WatchError {
  if (status === undefined || status === 429) return new WatchError(message, status, cause)
  return status === 410 ? new GoneError(message, status, cause) : new RelistError(message, status, cause)
}

/**
 * The longest wait after a very short watch: its back-off grows to this, not to the 30 s of an
 * outage. A kube-apiserver going down or coming up may close a few watches at once, and the view
 * must not lag the next one by seconds; one watch a second bounds the loop.
 */
const shortWatchMaxWaitMs = 1000

/** wake() ends a back-off at most this often. */
const wakeEveryMs = 250

/**
 * Whether a review may end the back-off after `error` (wake()): after a list that had no answer or
 * was refused with 429 or 5xx, or a watch that had no answer or a 429, an outage that a review's
 * arrival shows may be over. Not after a refusal that a review says nothing about (403, 404), nor
 * after a watch that calls for a list (a 410, an ERROR event, a watch refused with a status, by a
 * proxy that refuses long requests for instance): against those, a list every 250 ms, as often as
 * reviews may wake it, would be a loop of lists of every object.
 */
function wakeable(error: unknown): boolean {
  if (error instanceof GoneError || error instanceof RelistError) return false
  const status = (error as { status?: unknown }).status
  return typeof status !== 'number' || status === 429 || status >= 500
}

/**
 * The timeoutSeconds of the first watch after one that failed: its end at that timeout, or an
 * event, is the first proof since the failure that the view is current, and reviews wait for one
 * (see Reflector.staleFor).
 */
export const resumeWatchSeconds = 1

/** A wait that doubles at each failure, up to a maximum, and starts over at reset(). */
export class Backoff {
  private readonly initialMs: number
  private readonly maxMs: number
  ms: number

  constructor(initialMs: number, maxMs: number) {
    this.initialMs = initialMs
    this.maxMs = maxMs
    this.ms = initialMs
  }

  grow(): void {
    this.ms = Math.min(this.ms * 2, this.maxMs)
  }

  reset(): void {
    this.ms = this.initialMs
  }
}

/**
 * Resolves after `ms`, or at once when `signal` aborts (or has). Node's timer takes its abort
 * listener off when it fires, so one long-lived signal can serve any number of waits.
 */
export const sleep = (ms: number, signal: AbortSignal): Promise<void> =>
  delay(ms, undefined, { signal }).catch(() => undefined)

export class Reflector<R> {
  private readonly options: ReflectorOptions<R>
  private readonly watchSeconds: number
  private readonly stopping = new AbortController()
  /** Aborted by wake(): ends the retry back-off under way, if wakeable(). */
  private waking = new AbortController()
  /** When wake() last ended a back-off, by `now`. */
  private wokenAt = Number.NEGATIVE_INFINITY
  private watchAbort: AbortController | undefined
  private loop: Promise<void> | undefined
  private resourceVersion = ''
  private listed = false
  private watching = false
  /** When the view was last shown to be current: see staleFor. */
  private heardAt: number
  /** The last watch failed, and no list has run since: the next asks for resumeWatchSeconds. */
  private resuming = false
  /** Completed lists; a re-list after the first means a watch could not continue. */
  lists = 0
  /** Why the last list or watch failed, until a list completes or a watch opens. */
  lastError: string | undefined

  constructor(options: ReflectorOptions<R>) {
    this.options = options
    this.watchSeconds = options.watchSeconds ?? 3
    this.heardAt = options.now()
  }

  /** The first list has completed: the sink holds a full view (client-go's HasSynced). */
  get synced(): boolean {
    return this.listed
  }

  /** A watch is open (its response has begun and not ended). */
  get isWatching(): boolean {
    return this.watching
  }

  /**
   * Milliseconds since the view was last shown to be current: by a list, by an event (a bookmark
   * too), or by kube-apiserver ending a watch at its timeoutSeconds. An open watch is no proof by
   * itself: one whose connection is dead (half-open) looks the same as a quiet one until its
   * timeout has passed. Nor is a watch's response beginning: the events it owes since its
   * resourceVersion (objects stored while the last watch was down) come after it. So a quiet view
   * ages up to watchSeconds between two watches, one whose watch is dead ages on, and after a
   * failure the view is shown current by the next watch's first event or by its end, which it asks
   * for after resumeWatchSeconds.
   */
  staleFor(now: number): number {
    return now - this.heardAt
  }

  private isStopped(): boolean {
    return this.stopping.signal.aborted
  }

  start(): void {
    this.loop ??= this.run()
  }

  /**
   * Retries at once if the reflector is waiting out a back-off after a list or watch failed for
   * an outage (see wakeable): the caller has seen the API server answer again. Without it, after
   * a long outage the back-off (up to its maximum, 30 s) outlasts the outage itself. No effect
   * while a watch is open, and at most once every wakeEveryMs: reviews call it, and against an
   * apiserver that answers reviews yet not the LIST, one LIST a review would be a flood of them.
   */
  wake(): void {
    if (this.watching) return
    const now = this.options.now()
    if (now - this.wokenAt < wakeEveryMs) return
    this.wokenAt = now
    this.waking.abort()
  }

  async stop(): Promise<void> {
    this.stopping.abort()
    this.watchAbort?.abort()
    await this.loop
  }

  private async run(): Promise<void> {
    const { log, resource } = this.options
    const { initialMs, maxMs } = this.options.backoff ?? { initialMs: 250, maxMs: 30_000 }
    // Failures to list or watch (no answer, a refusal): starts over once a list completes.
    const outage = new Backoff(initialMs, maxMs)
    // Lists a failed watch calls for (410, an ERROR event, a refusal with a status): starts over
    // only once a watch has ended at its timeout, not at the list, so that a watch that fails
    // every time (RBAC that grants list but not watch, an etcd watch failing, 410 at once) is a
    // list every 30 s at most, not a loop of lists of every object. client-go's Reflector.Run likewise waits its
    // back-off (800 ms to 30 s) before every ListAndWatch after the first, and starts it over
    // only after 2 minutes without a failure (k8s.io/client-go/tools/cache/reflector.go).
    const relists = new Backoff(initialMs, maxMs)
    // Very short watches back off on their own, to at most shortWatchMaxWaitMs: the apiserver
    // answered, so they are no outage, and they do not lengthen the back-off of one that follows.
    const shortWatches = new Backoff(initialMs, shortWatchMaxWaitMs)
    // A watch's first event ends an outage; only its end at its timeout, a watch that did not
    // fail, ends the back-off of lists (one event then an ERROR every time is still a failing watch).
    const answered = (): void => {
      outage.reset()
      shortWatches.reset()
    }
    let needList = true
    while (!this.isStopped()) {
      try {
        if (needList) {
          await this.list()
          needList = false
          // A list that completes ends an outage: the delay grown during it is not carried into
          // the first watch after it, which would otherwise wait seconds while decisions go on.
          outage.reset()
          shortWatches.reset()
        }
        await this.watch(answered)
        relists.reset()
        answered()
      } catch (error) {
        if (this.isStopped()) break
        let backoff = error instanceof ShortWatchError ? shortWatches : outage
        if (error instanceof GoneError) {
          log.info({ resource: resource.plural, retryInMs: relists.ms }, 'watch resourceVersion too old; listing again')
          needList = true
          backoff = relists
        } else {
          this.lastError = error instanceof Error ? error.message : String(error)
          if (error instanceof RelistError) {
            needList = true
            backoff = relists
          }
          log.warn({ resource: resource.plural, err: error, retryInMs: backoff.ms }, 'list/watch failed; retrying')
        }
        this.waking = new AbortController()
        const woken = wakeable(error) ? [this.waking.signal] : []
        await sleep(backoff.ms, AbortSignal.any([this.stopping.signal, ...woken]))
        backoff.grow()
      }
    }
  }

  private async list(): Promise<void> {
    const { kubeConfig, resource, sink, log } = this.options
    const records: R[] = []
    // Each page is projected as it arrives, so only one page of full objects is held at a time.
    // stop() aborts it: a LIST the apiserver does not answer must not hold a shutdown.
    this.resourceVersion = await listAll(kubeConfig, resource, (page) => {
      for (const item of page) {
        const record = sink.project(item)
        if (record !== undefined) records.push(record)
      }
    }, undefined, this.stopping.signal)
    sink.replace(records)
    this.heardAt = this.options.now()
    this.resuming = false
    this.listed = true
    this.lastError = undefined
    this.lists++
    log.info({ resource: resource.plural, version: resource.version, count: records.length, resourceVersion: this.resourceVersion }, 'listed')
    this.options.onListed?.()
  }

  /**
   * One watch, until kube-apiserver ends it at its timeout (or stop()): resolves then. Rejects on
   * error, on 410, when it was very short (ShortWatchError), and when it is not over watchGraceMs
   * after its timeoutSeconds. `firstEvent` is called at its first event.
   */
  private watch(firstEvent: () => void): Promise<void> {
    const { kubeConfig, resource, sink, log, now } = this.options
    const path = `/apis/${resource.group}/${resource.version}/${resource.plural}`
    const started = now()
    const timeoutSeconds = this.resuming ? Math.min(resumeWatchSeconds, this.watchSeconds) : this.watchSeconds
    this.watchAbort = undefined
    let events = 0
    let settled = false
    // stop() ends the wait at once, also before the response has begun: client-node's Watch hands
    // out its abort only with the response headers, and waits 30 s for them.
    let stopped = (): void => undefined
    let overdue: NodeJS.Timeout | undefined
    const watched = new Promise<void>((resolve, reject) => {
      let failure: Error | undefined
      const end = (error?: Error): void => {
        if (settled) return
        settled = true
        clearTimeout(overdue)
        if (error === undefined) resolve()
        else reject(error)
      }
      stopped = () => {
        this.watching = false
        end()
      }
      // Until its response begins, a watch waits up to watchHeadersMs: kube-apiserver starts its
      // timeoutSeconds only then, and may queue the request first (API Priority and Fairness).
      // client-node's request, which cannot be aborted before it, is left to its own timeout (30 s).
      overdue = setTimeout(() => {
        failure = new WatchError(`watching ${resource.plural}: no response within ${String(watchHeadersMs / 1000)} s`, undefined)
        end(failure)
      }, watchHeadersMs)
      // From its beginning, timeoutSeconds and watchGraceMs; then it is aborted (onDone rejects).
      const watchdog = (): void => {
        clearTimeout(overdue)
        overdue = setTimeout(() => {
          failure = new WatchError(`watching ${resource.plural}: still open ${String(watchGraceMs / 1000)} s after its timeout of ${String(timeoutSeconds)} s; taken for a dead connection`, undefined)
          this.watchAbort?.abort()
        }, timeoutSeconds * 1000 + watchGraceMs)
      }
      const onEvent = (type: string, object: WatchEvent['object']): void => {
        if (object === undefined || settled) return
        if (type === 'ERROR') {
          // An event without a code is a Status with code 0, as client-go's apierrors.FromObject reads it.
          failure = watchError(object.code ?? 0, `watching ${resource.plural}: ${String(object.code ?? '')} ${object.reason ?? ''}: ${object.message ?? ''}`)
          this.watchAbort?.abort()
          return
        }
        const version = object.metadata?.resourceVersion
        if (version) this.resourceVersion = version
        if (events++ === 0) firstEvent()
        this.heardAt = now()
        if (type === 'ADDED' || type === 'MODIFIED') {
          const record = sink.project(object)
          if (record !== undefined) sink.upsert(record)
        }
        else if (type === 'DELETED') sink.remove(object)
      }
      const onDone = (error: unknown): void => {
        if (settled) return
        const lasted = now() - started
        const short = events === 0 && lasted < Math.min(shortWatchMs, timeoutSeconds * 500) && !this.stopping.signal.aborted
        this.watching = false
        const ended = !failure && !error && !short
        // Ended by kube-apiserver at its timeout: the view was current until now.
        if (ended) this.heardAt = now()
        this.resuming = !ended
        if (failure) end(failure)
        else if (error && !this.stopping.signal.aborted) {
          const status = statusOf(error)
          end(watchError(status, `watching ${resource.plural}: ${error instanceof Error ? error.message : JSON.stringify(error)}${status === undefined ? '' : ` (HTTP ${String(status)})`}`, error))
        }
        else if (short) end(new ShortWatchError(`watching ${resource.plural}: closed after ${String(lasted)} ms with no event`))
        else {
          log.debug({ resource: resource.plural, events }, 'watch ended')
          end()
        }
      }
      new Watch(kubeConfig)
        .watch(path, {
          resourceVersion: this.resourceVersion,
          allowWatchBookmarks: true,
          timeoutSeconds,
        }, onEvent, onDone)
        .then((abort) => {
          if (settled) {
            abort.abort()
            return
          }
          this.watchAbort = abort
          if (!abort.signal.aborted) {
            this.watching = true
            this.lastError = undefined
            watchdog()
          }
          if (this.stopping.signal.aborted) abort.abort()
        }, (error: unknown) => { end(error instanceof Error ? error : new Error(String(error))) })
    })
    if (this.stopping.signal.aborted) stopped()
    this.stopping.signal.addEventListener('abort', stopped, { once: true })
    const unlisten = (): void => { this.stopping.signal.removeEventListener('abort', stopped) }
    watched.then(unlisten, unlisten)
    return watched
  }
}
