// A TCP round robin for the local control plane (hack/local/up.sh starts it when WEBHOOK_REPLICAS
// is 2 or more): kube-apiserver calls the webhook at one address, and each new connection goes to
// the next replica, as a Service spreads connections over its endpoints. TLS passes through
// untouched. A replica that refuses the connection is skipped for that connection, as kube-proxy
// leaves out endpoints that are not ready. Needs only Node (24, which runs this file as it is).
//
//   node hack/local/round-robin-proxy.ts --listen 127.0.0.1:29443 --backend 127.0.0.1:29444 --backend 127.0.0.1:29445
//
// Logs one line when it listens, one per backend it could not reach, and the connections each
// backend took when it stops (SIGTERM, SIGINT).

import { connect, createServer, type Socket } from 'node:net'
import { parseArgs } from 'node:util'

interface Endpoint {
  readonly host: string
  readonly port: number
}

function endpoint(text: string): Endpoint {
  const at = text.lastIndexOf(':')
  const port = Number(text.slice(at + 1))
  if (at <= 0 || !Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`"${text}" is not HOST:PORT`)
  return { host: text.slice(0, at), port }
}

const { values } = parseArgs({ options: { listen: { type: 'string' }, backend: { type: 'string', multiple: true } } })
if (values.listen === undefined || (values.backend ?? []).length === 0) {
  console.error('usage: round-robin-proxy.ts --listen HOST:PORT --backend HOST:PORT [--backend HOST:PORT ...]')
  process.exit(2)
}
const listen = endpoint(values.listen)
const backends = (values.backend ?? []).map(endpoint)
const taken = backends.map(() => 0)
let next = 0

const log = (message: string): void => {
  console.log(`${new Date().toISOString()} ${message}`)
}

/** Connects `client` to the next backend that accepts, trying each at most once. */
function forward(client: Socket, tries: number): void {
  const index = next
  next = (next + 1) % backends.length
  const backend = backends[index] as Endpoint
  const upstream = connect(backend.port, backend.host)
  const refused = (error: Error): void => {
    log(`backend ${backend.host}:${String(backend.port)}: ${error.message}`)
    if (tries + 1 < backends.length && !client.destroyed) forward(client, tries + 1)
    else client.destroy()
  }
  upstream.once('error', refused)
  upstream.once('connect', () => {
    upstream.off('error', refused)
    taken[index] = (taken[index] ?? 0) + 1
    upstream.on('error', () => client.destroy())
    client.on('error', () => upstream.destroy())
    client.pipe(upstream).pipe(client)
    client.resume()
  })
}

const server = createServer({ pauseOnConnect: true }, (client) => {
  client.on('error', () => client.destroy())
  forward(client, 0)
})

server.listen(listen.port, listen.host, () => {
  log(`listening on ${listen.host}:${String(listen.port)}, round robin over ${backends.map((backend) => `${backend.host}:${String(backend.port)}`).join(', ')}`)
})

const stop = (signal: string): void => {
  log(`${signal}: connections per backend: ${backends.map((backend, index) => `${backend.host}:${String(backend.port)} ${String(taken[index])}`).join(', ')}`)
  server.close()
  process.exit(0)
}
process.once('SIGTERM', () => { stop('SIGTERM') })
process.once('SIGINT', () => { stop('SIGINT') })
