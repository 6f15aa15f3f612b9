// A stand-in for kube-apiserver over plain HTTP on loopback: each request is answered by `answer`
// (status and JSON body), left open after its headers ('open', a watch with no events), answered
// by a function given the response (a watch that sends events over time), or left hanging when it
// returns undefined. Enough for discovery, paged LISTs, watches and a kubeconfig
// that points at it.

import { KubeConfig } from '@kubernetes/client-node'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface StandIn {
  readonly kubeConfig: KubeConfig
  /** The paths requested, in order. */
  readonly requests: string[]
  close(): Promise<void>
}

export async function standIn(answer: (request: IncomingMessage) => { status: number, body: unknown } | 'open' | ((response: ServerResponse) => void) | undefined): Promise<StandIn> {
  const requests: string[] = []
  const server: Server = createServer((request, response) => {
    requests.push(request.url ?? '')
    const reply = answer(request)
    if (reply === undefined) return
    if (typeof reply === 'function') {
      reply(response)
      return
    }
    if (reply === 'open') {
      response.writeHead(200, { 'content-type': 'application/json' }).flushHeaders()
      return
    }
    response.writeHead(reply.status, { 'content-type': 'application/json' }).end(JSON.stringify(reply.body))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  const kubeConfig = new KubeConfig()
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'c', server: `http://127.0.0.1:${String(port)}`, skipTLSVerify: true }],
    users: [{ name: 'u', token: 'the-token' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  })
  return {
    kubeConfig,
    requests,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => { resolve() })
    }),
  }
}

/** A watch that sends `events` over time, then ends as kube-apiserver does at its timeoutSeconds (`endMs`), unless undefined. */
export function streaming(events: { afterMs: number, event: unknown }[], endMs: number | undefined): (response: ServerResponse) => void {
  return (response) => {
    response.writeHead(200, { 'content-type': 'application/json' }).flushHeaders()
    const timers = events.map(({ afterMs, event }) => setTimeout(() => { response.write(`${JSON.stringify(event)}\n`) }, afterMs))
    if (endMs !== undefined) timers.push(setTimeout(() => { response.end() }, endMs))
    response.on('close', () => { for (const timer of timers) clearTimeout(timer) })
  }
}

/**
 * A stand-in whose answers come from `answer(kind, n)`: the n-th list or watch, from 1; 'reset'
 * closes the connection unanswered (kube-apiserver going down). Each request's time is kept.
 */
export async function scripted(answer: (kind: 'list' | 'watch', n: number) => { status: number, body: unknown } | 'open' | 'reset' | ((response: ServerResponse) => void)) {
  const counts = { list: 0, watch: 0 }
  const times: { kind: 'list' | 'watch', at: number }[] = []
  const server = await standIn((request) => {
    const kind = (request.url ?? '').includes('watch=true') ? 'watch' : 'list'
    times.push({ kind, at: Date.now() })
    const reply = answer(kind, ++counts[kind])
    if (reply !== 'reset') return reply
    request.socket.destroy()
    return undefined
  })
  return { server, counts, watchTimes: () => times.filter((entry) => entry.kind === 'watch').map((entry) => entry.at) }
}
