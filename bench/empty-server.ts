// The anchor for the webhook's cost per review: an empty fastify HTTPS handler that parses the same
// AdmissionReview (fastify's own JSON parser) and answers "allowed" with its uid. Same TLS, same
// Node, its own process. Started by bench/run.ts, which loads it and the webhook side by side.

import fastify from 'fastify'
import { readFileSync } from 'node:fs'
import { checkKeyPair, secureContextOptions } from '../src/server/certificate.ts'

const [certPath, keyPath, port] = process.argv.slice(2)
const pair = checkKeyPair(readFileSync(certPath!), readFileSync(keyPath!))
const app = fastify({ https: secureContextOptions(pair), bodyLimit: 7 * 1024 * 1024 })
app.post('/validate', (request, reply) => {
  const uid = (request.body as { request?: { uid?: string } }).request?.uid ?? ''
  return reply.send({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid, allowed: true } })
})
await app.listen({ host: '127.0.0.1', port: Number(port ?? 0) })
const address = app.server.address()
process.send?.({ port: typeof address === 'object' && address !== null ? address.port : 0 })
process.on('message', (message) => {
  if (message === 'cpu') process.send?.({ cpu: process.cpuUsage() })
  if (message === 'stop') void app.close().then(() => process.exit(0))
})
