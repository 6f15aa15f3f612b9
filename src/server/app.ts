// The HTTP edge: builds fastify apps from their dependencies; nothing here listens or reads files.
// The webhook app serves POST /validate over HTTPS; both apps serve /livez, /readyz and /metrics.

import fastify, { LogController, type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply } from 'fastify'
import type { SecureContextOptions } from 'node:tls'
import { errors } from '../admission/errors.ts'
import { errorOutcome, type Outcome, type Reviewer } from '../admission/reviewer.ts'
import { findUID } from '../admission/review.ts'
import { InFlightBudget, LargeBodyRate, LimitError, guardRequests, healthLimits, serverOptions, webhookLimits, type Limits } from './limits.ts'
import { violationMessages } from '../policy/engine.ts'
import type { Decision } from '../policy/types.ts'
import type { Metrics } from './metrics.ts'
import { Turns } from './turns.ts'

export interface Readiness {
  readonly ready: boolean
  readonly checks: Readonly<Record<string, unknown>>
}

export interface Health {
  readiness(): Readiness
}

export interface AppOptions {
  readonly logger: FastifyBaseLogger
  readonly metrics: Metrics
  readonly health: Health
  /** Default: webhookLimits or healthLimits (src/server/limits.ts). */
  readonly limits?: Limits
}

/** What the webhook logs of each decision, at level info with the message 'review'. */
export interface DecisionLine {
  readonly uid: string
  readonly user: string | undefined
  readonly operation: string
  readonly resource: 'Service' | 'ServiceCIDR'
  readonly name: string | undefined
  readonly cidrs: readonly string[] | undefined
  readonly verdict: string
  readonly reason: string | undefined
  readonly rules: readonly string[] | undefined
  readonly warnings: readonly string[] | undefined
  readonly dryRun: boolean | undefined
  readonly reservation: Outcome['reservation']
  readonly durationMs: number
}

export type DecisionLog = (line: DecisionLine) => void

export interface WebhookAppOptions extends AppOptions {
  readonly reviewer: Reviewer
  /** Default: `logger.info(line, 'review')`; serve passes the cheaper writer of src/cli/logger.ts. */
  readonly decisions?: DecisionLog | undefined
  /** TLS for the webhook; absent only in tests, which use inject(). */
  readonly https?: SecureContextOptions
  /**
   * True once shutdown has begun. Every answer then says `Connection: close`, so each kept-alive
   * connection kube-apiserver still uses ends after a response, closed by us in order: a connection
   * left idle until the server closes races a review sent on it at that moment, which the apiserver
   * reports as "connection reset" and does not retry (a POST). Seen in 13-kind-faults (c).
   */
  readonly draining?: () => boolean
}

function registerHealthRoutes(app: FastifyInstance, { metrics, health }: AppOptions): void {
  app.get('/livez', (_request, reply) => reply.send({ status: 'ok' }))
  app.get('/readyz', async (_request, reply) => {
    const readiness = health.readiness()
    return reply.code(readiness.ready ? 200 : 503).send(readiness)
  })
  app.get('/metrics', async (_request, reply) => {
    const body = await metrics.registry.metrics()
    return reply.type(metrics.registry.contentType).send(body)
  })
}

/** Maps what is refused before our handler runs (content type, size, budget) to stable errors. */
function edgeError(error: FastifyError): typeof errors[keyof typeof errors] {
  switch (error.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return errors.contentType
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
    case 'SCG_BODY_TOO_LARGE':
      return errors.bodyTooLarge
    case 'SCG_OVERLOADED':
      return errors.overloaded
    default:
      if (error instanceof SyntaxError) return errors.invalidJSON
      return error.statusCode !== undefined && error.statusCode < 500 ? errors.badRequest : errors.internal
  }
}

function operationOf(outcome: Outcome): string {
  return outcome.request?.operation ?? outcome.operation ?? outcome.service?.operation ?? 'UNKNOWN'
}

/** A decision's violations as its log line's reason: '' for none, without an array made for it (every admitted review). */
function reasons(decision: Decision | undefined): string {
  if (decision === undefined || decision.violations.length === 0) return ''
  return violationMessages(decision.violations)
}

/** The rules of a decision without violations, for its log line: one frozen array for all. */
const noRules: readonly string[] = Object.freeze([])

function send(reply: FastifyReply, outcome: Outcome): FastifyReply {
  return reply.code(outcome.status).type('application/json').send(outcome.review)
}

/** A fastify app with the limits of src/server/limits.ts: timeouts, connections, the in-flight budget. */
function limitedApp(options: AppOptions, limits: Limits, https: SecureContextOptions | undefined): FastifyInstance {
  const { http, tls, ...fastifyOptions } = serverOptions(limits)
  const app = fastify({
    loggerInstance: options.logger,
    // One log line per decision is written by the webhook; fastify's per-request lines would double it.
    logController: new LogController({ disableRequestLogging: true }),
    // No child logger per request: nothing logs through request.log, and a pino child (binding the
    // request id) cost more CPU than the decision itself (docs/benchmarks.md, "Cost per review").
    childLoggerFactory: (logger) => logger,
    ...fastifyOptions,
    // Requests already on a kept-alive connection are still answered while closing: a 503 there
    // would fail an apiserver request for no reason during a rolling update.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    ...(https === undefined ? { http } : { https: { ...https, ...http, ...tls } }),
  })
  app.server.maxConnections = limits.maxConnections
  guardRequests(app, new InFlightBudget(limits), new LargeBodyRate(limits))
  return app
}

/**
 * Counts refusals made before a body is read (over budget, too large) and logs them at most every
 * `everyMs`: under a flood, a log line per refused request would be a flood of its own.
 */
function refusalLog(logger: FastifyBaseLogger, everyMs: number): (code: string) => void {
  let counts: Record<string, number> = {}
  let timer: NodeJS.Timeout | undefined
  return (code) => {
    counts[code] = (counts[code] ?? 0) + 1
    timer ??= setTimeout(() => {
      logger.warn({ refused: counts, seconds: everyMs / 1000 }, 'requests refused at the edge (over the in-flight budget or too large)')
      counts = {}
      timer = undefined
    }, everyMs).unref()
  }
}

export function buildWebhookApp(options: WebhookAppOptions): FastifyInstance {
  const { logger, metrics, reviewer } = options
  const decisions = options.decisions ?? ((line: DecisionLine) => { logger.info(line, 'review') })
  const app = limitedApp(options, options.limits ?? webhookLimits, options.https)
  const refused = refusalLog(logger, 10_000)
  // Every answer, decided or refused, closes its connection once shutdown has begun.
  const answer = (reply: FastifyReply, outcome: Outcome): FastifyReply => {
    if (options.draining?.() === true) reply.header('connection', 'close')
    return send(reply, outcome)
  }

  // Times by performance.now(), monotonic like process.hrtime.bigint() and at a microsecond or
  // better, but a number: three bigints a review were garbage.
  const record = (outcome: Outcome, startedAt: number): void => {
    const seconds = (performance.now() - startedAt) / 1e3
    const operation = operationOf(outcome)
    const label = outcome.verdict
    metrics.reviews.inc({ operation, outcome: label })
    if (outcome.error) metrics.errors.inc({ code: outcome.error.code })
    else metrics.decisionSeconds.observe({ operation }, seconds)
    const { request, decision, service } = outcome
    const line: DecisionLine = {
      uid: outcome.uid,
      user: request?.userInfo.username,
      operation,
      resource: service ? 'Service' : 'ServiceCIDR',
      name: request?.name ?? (service && `${service.namespace}/${service.name}`),
      cidrs: decision?.cidrs,
      verdict: label,
      reason: decision?.message || decision?.bypass || reasons(decision) || outcome.error?.code,
      rules: decision && (decision.violations.length === 0 ? noRules : decision.violations.map((violation) => violation.rule)),
      warnings: decision?.warnings.length ? decision.warnings : undefined,
      dryRun: request?.dryRun,
      reservation: outcome.reservation,
      durationMs: Math.round(seconds * 1e6) / 1e3,
    }
    if (outcome.error?.code === errors.overloaded.code || outcome.error?.code === errors.bodyTooLarge.code) refused(outcome.error.code)
    else if (outcome.error) logger.warn({ ...line, detail: outcome.error.detail }, outcome.status >= 500 ? 'review refused: internal error' : 'review refused: bad request')
    else decisions(line)
  }

  // AdmissionReviews are JSON (the apiserver sends application/json); nothing else is parsed.
  app.removeContentTypeParser('text/plain')

  app.setErrorHandler((error: FastifyError, request, reply) => {
    const known = edgeError(error)
    // Our own message says what is wrong; fastify's adds only for errors we do not name.
    const outcome = errorOutcome('', known, known === errors.badRequest || error instanceof LimitError ? error.message : '')
    if (known === errors.internal) logger.error({ err: error, url: request.url }, 'internal error')
    record(outcome, performance.now())
    // The rest of a refused body is not read: the connection cannot carry another request.
    if (error instanceof LimitError) reply.header('connection', 'close')
    if (known === errors.overloaded) reply.header('retry-after', '1')
    return answer(reply, outcome)
  })

  app.setNotFoundHandler((_request, reply) => answer(reply, errorOutcome('', errors.notFound)))

  // Answers go out together at the end of the turn that read their requests (src/server/turns.ts).
  const turns = new Turns()
  app.post('/validate', async (request, reply) => {
    const startedAt = performance.now()
    const turn = turns.begin()
    let outcome: Outcome
    const body = request.body
    if (!Buffer.isBuffer(body) || body.length === 0) {
      outcome = errorOutcome('', errors.emptyBody)
    } else {
      try {
        // Awaited only when the reviewer waits (for the cluster, or the Lease).
        const reviewed = reviewer(body)
        outcome = reviewed instanceof Promise ? await reviewed : reviewed
      } catch (error) {
        // A bug must not cost a decision: answer (refusing, with the uid) and keep serving.
        logger.error({ err: error }, 'review failed')
        outcome = errorOutcome(findUID(body), errors.internal)
      }
    }
    record(outcome, startedAt)
    // Awaited only while the turn lasts: an answer that waited for the Lease comes after its turn
    // ended, and `await undefined` would still cost it a suspension and a microtask.
    const turnEnd = turns.after(turn)
    if (turnEnd !== undefined) await turnEnd
    return answer(reply, outcome)
  })

  registerHealthRoutes(app, options)
  return app
}

/** Plain HTTP, for kubelet probes and Prometheus: answers even before a certificate exists. */
export function buildHealthApp(options: AppOptions): FastifyInstance {
  const app = limitedApp(options, options.limits ?? healthLimits, undefined)
  registerHealthRoutes(app, options)
  return app
}
