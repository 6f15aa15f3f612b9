// What one replica accepts at once, so that no client, hostile or broken, can take it down: with
// failurePolicy Fail, a replica killed for memory blocks every ServiceCIDR change it was serving.
// The figures behind the numbers are in docs/benchmarks.md ("Hostile input"); what a refused
// client sees, and what kube-apiserver then does, is in docs/deploy.md ("Limits").

import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Readable } from 'node:stream'
import { maxReviewBytes } from '../admission/review.ts'

const KiB = 1024
const MiB = 1024 * KiB

export interface Limits {
  /** The largest request body: the largest AdmissionReview (maxReviewBytes). */
  readonly bodyBytes: number
  /** Request bytes held at once, over all connections: bodies being received, decoded or answered. */
  readonly inFlightBytes: number
  /** The part of inFlightBytes that only bodies of at most smallBodyBytes may use. */
  readonly reservedBytes: number
  readonly smallBodyBytes: number
  /** Every request is charged this much before its body: its headers (up to Node's 16 KiB) and the objects built for it. */
  readonly requestBytes: number
  /**
   * Bytes a second that bodies over smallBodyBytes may bring in, over all connections, with a
   * burst of one largest body: what bounds the CPU a flood of large bodies takes from the reviews
   * that matter (reading a body costs time in proportion to its size).
   */
  readonly largeBytesPerSecond: number
  /** Open connections; a new one beyond this is closed at once (net.Server#maxConnections). */
  readonly maxConnections: number
  /** Time to finish the TLS handshake. */
  readonly handshakeTimeoutMs: number
  /** Time from a request's first byte to its last header. */
  readonly headersTimeoutMs: number
  /** Time from a request's first byte to its last body byte (the handler's time is not counted). */
  readonly requestTimeoutMs: number
  /** A connection with no traffic for this long is closed: before its first request, and while a request is handled. */
  readonly idleTimeoutMs: number
  /** A kept-alive connection with no request for this long is closed. */
  readonly keepAliveTimeoutMs: number
  /** How often the headers and request timeouts are checked (Node checks every 30 s by default). */
  readonly timeoutCheckMs: number
}

/**
 * The webhook's limits. Memory: the in-flight budget holds at most 32 MiB of bodies (about twice
 * that in the process, while a body is copied out of the socket's chunks), and an idle TLS
 * connection costs the server about 75 KiB (docs/benchmarks.md), so 1,500 connections cost at most
 * ~110 MiB. Time: kube-apiserver sends a review at once and waits at most the registration's
 * timeoutSeconds (5 s; 30 s is the API's maximum), so a client slower than the timeouts below is
 * not an apiserver.
 */
export const webhookLimits: Limits = {
  bodyBytes: maxReviewBytes,
  inFlightBytes: 32 * MiB,
  reservedBytes: 4 * MiB,
  smallBodyBytes: 64 * KiB,
  requestBytes: 16 * KiB,
  // No real ServiceCIDR or Service review is over 64 KiB; one of the largest every 1.5 s is plenty.
  largeBytesPerSecond: 4 * MiB,
  maxConnections: 1500,
  handshakeTimeoutMs: 5_000,
  headersTimeoutMs: 5_000,
  requestTimeoutMs: 10_000,
  // Longer than the longest time kube-apiserver waits for an answer (timeoutSeconds is at most 30).
  idleTimeoutMs: 30_000,
  // Longer than the idle timeout of kube-apiserver's client (Go's http.Transport, IdleConnTimeout
  // 90 s, set by SetOldTransportDefaults in k8s.io/apimachinery/pkg/util/net/http.go), so the
  // client closes an idle connection first: a server closing it first can race a review the client
  // is sending on it, and Go does not retry a POST.
  keepAliveTimeoutMs: 95_000,
  timeoutCheckMs: 1_000,
}

/** The probe and metrics port takes no bodies, and only the kubelet and Prometheus call it. */
export const healthLimits: Limits = {
  ...webhookLimits,
  bodyBytes: 1 * KiB,
  inFlightBytes: 2 * MiB,
  reservedBytes: 0,
  maxConnections: 512,
  idleTimeoutMs: 10_000,
  keepAliveTimeoutMs: 15_000,
}

/** The request bytes held across all connections, with a part kept back for small bodies. */
export class InFlightBudget {
  readonly limits: Limits
  private used = 0

  constructor(limits: Limits) {
    this.limits = limits
  }

  get inUse(): number {
    return this.used
  }

  /** What a request may still take; a large one (over smallBodyBytes) leaves the reserve alone. */
  available(large: boolean): number {
    return (large ? this.limits.inFlightBytes - this.limits.reservedBytes : this.limits.inFlightBytes) - this.used
  }

  take(bytes: number, large: boolean): boolean {
    if (bytes > this.available(large)) return false
    this.used += bytes
    return true
  }

  give(bytes: number): void {
    this.used -= bytes
  }
}

/** A token bucket for the bytes of large bodies: largeBytesPerSecond, up to one largest body at once. */
export class LargeBodyRate {
  private readonly limits: Limits
  private readonly now: () => number
  private tokens: number
  private at: number

  constructor(limits: Limits, now: () => number = () => performance.now()) {
    this.limits = limits
    this.now = now
    this.tokens = limits.bodyBytes
    this.at = now()
  }

  take(bytes: number): boolean {
    const now = this.now()
    this.tokens = Math.min(this.limits.bodyBytes, this.tokens + ((now - this.at) / 1000) * this.limits.largeBytesPerSecond)
    this.at = now
    if (bytes > this.tokens) return false
    this.tokens -= bytes
    return true
  }
}

/** A refusal before or while a body is read, with the stable code the error handler answers with; the message is the detail. */
export class LimitError extends Error {
  readonly code: 'SCG_BODY_TOO_LARGE' | 'SCG_OVERLOADED'
  readonly statusCode: 413 | 429

  constructor(code: LimitError['code'], detail: string) {
    super(detail)
    this.code = code
    this.statusCode = code === 'SCG_BODY_TOO_LARGE' ? 413 : 429
  }
}

/** fastify and Node options that enforce the timeouts and the body limit. */
export function serverOptions(limits: Limits): {
  bodyLimit: number
  connectionTimeout: number
  keepAliveTimeout: number
  requestTimeout: number
  http: { headersTimeout: number, requestTimeout: number, connectionsCheckingInterval: number }
  tls: { handshakeTimeout: number }
} {
  return {
    bodyLimit: limits.bodyBytes,
    connectionTimeout: limits.idleTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    http: { headersTimeout: limits.headersTimeoutMs, requestTimeout: limits.requestTimeoutMs, connectionsCheckingInterval: limits.timeoutCheckMs },
    tls: { handshakeTimeout: limits.handshakeTimeoutMs },
  }
}

function declaredLength(request: FastifyRequest): number | undefined {
  const header = request.headers['content-length']
  if (header === undefined) return undefined
  const length = Number(header)
  return Number.isSafeInteger(length) && length >= 0 ? length : undefined
}

/**
 * Charges every request to the budget from its first hook until its response is closed (sent, or
 * the connection gone): whatever the handler awaits, its body stays counted. A body is charged as
 * its bytes arrive, not as announced, so a client announcing much and sending little holds little;
 * one announcing more than the budget has left, or a large one beyond the large-body rate, is
 * refused before a byte of it is read. The JSON body is handed on as the raw bytes:
 * src/admission/review.ts reads only what it needs of them.
 */
export function guardRequests(app: FastifyInstance, budget: InFlightBudget, rate: LargeBodyRate): void {
  const { limits } = budget
  const held = new WeakMap<FastifyRequest, { bytes: number }>()

  // Callback style, not async: no promise per request. A refusal sends and does not call done.
  app.addHook('onRequest', (request, reply, done) => {
    const declared = declaredLength(request)
    if (declared !== undefined && declared > limits.bodyBytes) {
      reply.send(new LimitError('SCG_BODY_TOO_LARGE', `content-length ${declared}`))
      return
    }
    const large = declared !== undefined && declared > limits.smallBodyBytes
    const fits = declared === undefined || declared + limits.requestBytes <= budget.available(large)
    if (!fits || !budget.take(limits.requestBytes, large)) {
      reply.send(new LimitError('SCG_OVERLOADED', declared === undefined ? '' : `content-length ${declared}`))
      return
    }
    if (large && !rate.take(declared)) {
      budget.give(limits.requestBytes)
      reply.send(new LimitError('SCG_OVERLOADED', `content-length ${declared}, over the rate for large bodies`))
      return
    }
    const charge = { bytes: limits.requestBytes }
    held.set(request, charge)
    // `on`, not `once`: a response closes once, and once's wrapper and removal cost every request.
    reply.raw.on('close', () => {
      budget.give(charge.bytes)
      charge.bytes = 0
    })
    done()
  })

  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', (request: FastifyRequest, payload: Readable, done: (error: Error | null, body?: Buffer) => void) => {
    const charge = held.get(request)
    const declared = declaredLength(request)
    const chunks: Buffer[] = []
    let received = 0
    // Set once done is called; any event after it is ignored (and an 'error' then still has a
    // listener). A flag, not three removeListener calls a request: the listeners go with the stream.
    let stopped = false
    const stop = (error: Error | null, body?: Buffer): void => {
      stopped = true
      // A refused body's bytes are not held while the rest of it arrives.
      chunks.length = 0
      done(error, body)
    }
    const onData = (chunk: Buffer): void => {
      if (stopped) return
      received += chunk.length
      if (received > limits.bodyBytes) {
        stop(new LimitError('SCG_BODY_TOO_LARGE', `more than ${limits.bodyBytes} bytes received`))
        return
      }
      const large = (declared ?? received) > limits.smallBodyBytes
      // An announced body paid its rate up front; one without content-length pays as it grows large.
      const paid = declared !== undefined || !large || rate.take(Math.min(chunk.length, received - limits.smallBodyBytes))
      if (charge === undefined || !paid || !budget.take(chunk.length, large)) {
        stop(new LimitError('SCG_OVERLOADED', `${received} bytes received`))
        return
      }
      charge.bytes += chunk.length
      chunks.push(chunk)
    }
    const onEnd = (): void => {
      if (stopped) return
      if (declared !== undefined && received !== declared) {
        stop(Object.assign(new Error('the body length differs from content-length'), { code: 'FST_ERR_CTP_INVALID_CONTENT_LENGTH', statusCode: 400 }))
        return
      }
      // A copy: the chunks are views of the socket's read buffers, which they would keep alive.
      stop(null, Buffer.concat(chunks, received))
    }
    // The body stream fails when the client hangs up before its last byte: its fault, a 400, as
    // fastify's own body reader (rawBody in lib/content-type-parser.js) marks it, not a 500.
    const onError = (error: Error & { statusCode?: number }): void => {
      if (stopped) return
      error.statusCode ??= 400
      stop(error)
    }
    payload.on('data', onData)
    payload.on('end', onEnd)
    payload.on('error', onError)
  })
}
