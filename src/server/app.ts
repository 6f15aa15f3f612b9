// The HTTP edge: builds fastify apps from their dependencies; nothing here listens or reads files.
// The webhook app serves POST /validate over HTTPS; both apps serve /livez, /readyz and /metrics.

import fastify, { LogController, type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply } from 'fastify'
import type { SecureContextOptions } from 'node:tls'
import { errors } from '../admission/errors.ts'
import { errorOutcome, type Outcome, type Reviewer } from '../admission/reviewer.ts'
import { findUID } from '../admission/review.ts'
import type { Metrics } from './metrics.ts'

/**
 * Two objects of up to 3 MiB (object and oldObject) plus slack, as controller-runtime's webhook
 * server allows (pkg/webhook/admission/http.go); fastify's 1 MiB default is too small.
 */
export const bodyLimit = 7 * 1024 * 1024

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
}

export interface WebhookAppOptions extends AppOptions {
  readonly reviewer: Reviewer
  /** TLS for the webhook; absent only in tests, which use inject(). */
  readonly https?: SecureContextOptions
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

/** Maps what fastify refuses before our handler runs (content type, size, JSON) to stable errors. */
function edgeError(error: FastifyError): typeof errors[keyof typeof errors] {
  switch (error.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return errors.contentType
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return errors.emptyBody
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return errors.bodyTooLarge
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return errors.invalidJSON
    default:
      if (error instanceof SyntaxError) return errors.invalidJSON
      return error.statusCode !== undefined && error.statusCode < 500 ? errors.badRequest : errors.internal
  }
}

function operationOf(outcome: Outcome): string {
  return outcome.request?.operation ?? (outcome.service ? 'CREATE' : 'UNKNOWN')
}

function send(reply: FastifyReply, outcome: Outcome): FastifyReply {
  return reply.code(outcome.status).type('application/json').send(outcome.review)
}

export function buildWebhookApp(options: WebhookAppOptions): FastifyInstance {
  const { logger, metrics, reviewer } = options
  const app = fastify({
    loggerInstance: logger,
    // One log line per decision is written below; fastify's per-request lines would double it.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit,
    // Requests already on a kept-alive connection are still answered while closing: a 503 there
    // would fail an apiserver request for no reason during a rolling update.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    ...(options.https === undefined ? {} : { https: options.https }),
  })

  const record = (outcome: Outcome, startedAt: bigint): void => {
    const seconds = Number(process.hrtime.bigint() - startedAt) / 1e9
    const operation = operationOf(outcome)
    const label = outcome.verdict
    metrics.reviews.inc({ operation, outcome: label })
    if (outcome.error) metrics.errors.inc({ code: outcome.error.code })
    else metrics.decisionSeconds.observe({ operation }, seconds)
    const { request, decision, service } = outcome
    const line = {
      uid: outcome.uid,
      user: request?.userInfo.username,
      operation,
      resource: service ? 'Service' : 'ServiceCIDR',
      name: request?.name ?? (service && `${service.namespace}/${service.name}`),
      cidrs: decision?.cidrs,
      verdict: label,
      reason: decision?.message || decision?.bypass || decision?.violations.map((violation) => violation.message).join('; ') || outcome.error?.code,
      rules: decision?.violations.map((violation) => violation.rule),
      warnings: decision?.warnings.length ? decision.warnings : undefined,
      dryRun: request?.dryRun,
      reservation: outcome.reservation,
      durationMs: Math.round(seconds * 1e6) / 1e3,
    }
    if (outcome.error) logger.warn({ ...line, detail: outcome.error.detail }, 'review refused: bad request')
    else logger.info(line, 'review')
  }

  // AdmissionReviews are JSON (the apiserver sends application/json); nothing else is parsed.
  app.removeContentTypeParser('text/plain')

  app.setErrorHandler((error: FastifyError, request, reply) => {
    const known = edgeError(error)
    // Our own message says what is wrong; fastify's adds only for errors we do not name.
    const outcome = errorOutcome('', known, known === errors.badRequest ? error.message : '')
    if (known === errors.internal) logger.error({ err: error, url: request.url }, 'internal error')
    record(outcome, process.hrtime.bigint())
    return send(reply, outcome)
  })

  app.setNotFoundHandler((_request, reply) => send(reply, errorOutcome('', errors.notFound)))

  app.post('/validate', async (request, reply) => {
    const startedAt = process.hrtime.bigint()
    let outcome: Outcome
    if (request.body === undefined || request.body === null || request.body === '') {
      outcome = errorOutcome('', errors.emptyBody)
    } else {
      try {
        outcome = await reviewer(request.body)
      } catch (error) {
        // A bug must not cost a decision: answer (refusing, with the uid) and keep serving.
        logger.error({ err: error }, 'review failed')
        outcome = errorOutcome(findUID(request.body), errors.internal)
      }
    }
    record(outcome, startedAt)
    return send(reply, outcome)
  })

  registerHealthRoutes(app, options)
  return app
}

/** Plain HTTP, for kubelet probes and Prometheus: answers even before a certificate exists. */
export function buildHealthApp(options: AppOptions): FastifyInstance {
  const app = fastify({ loggerInstance: options.logger, logController: new LogController({ disableRequestLogging: true }) })
  registerHealthRoutes(app, options)
  return app
}
