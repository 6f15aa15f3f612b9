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
