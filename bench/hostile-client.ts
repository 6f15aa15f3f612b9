// The hostile side of bench/hostile.ts, in its own process so that its work does not delay the
// legitimate client's event loop. Prints one JSON line with what it saw, then exits.
//
//   node bench/hostile-client.ts flood PORT SECONDS CLIENTS BODY_BYTES SHAPE CA_FILE
//     CLIENTS keep-alive HTTPS connections, each POSTing a BODY_BYTES AdmissionReview as soon as the
//     last one was answered or refused (and reconnecting when the server closes the connection).
//     SHAPE: `padding` (one long annotation value) or `labels` (as many small labels as fit).
//   node bench/hostile-client.ts slow PORT SECONDS CONNECTIONS CA_FILE
//     CONNECTIONS held open at once, four kinds in equal parts, each reopened when the server closes
//     it: TCP only (no TLS handshake), TLS and nothing sent, headers sent a byte a second, and a body
//     of 1 MiB announced and sent a byte a second.

import { readFileSync } from 'node:fs'
import { connect as tcpConnect, type Socket } from 'node:net'
import { connect as tlsConnect } from 'node:tls'
import { Client } from 'undici'

const [mode, portText, secondsText, ...rest] = process.argv.slice(2)
const port = Number(portText)
const deadline = performance.now() + Number(secondsText) * 1000

/** A valid ServiceCIDR CREATE review of exactly `bytes` bytes, its size made up by metadata. */
function floodBody(bytes: number, shape: string): Buffer {
  const review = (metadata: Record<string, unknown>): string => JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: 'flood',
      kind: { group: 'networking.k8s.io', version: 'v1', kind: 'ServiceCIDR' },
      resource: { group: 'networking.k8s.io', version: 'v1', resource: 'servicecidrs' },
      name: 'flood',
      operation: 'CREATE',
      userInfo: { username: 'mallory', groups: ['system:authenticated'] },
      object: { apiVersion: 'networking.k8s.io/v1', kind: 'ServiceCIDR', metadata: { name: 'flood', ...metadata }, spec: { cidrs: ['34.118.224.0/24'] } },
      oldObject: null,
      dryRun: false,
    },
  })
  const labels: Record<string, string> = {}
  if (shape === 'labels') {
    // Room is left for the annotation that makes the size exact.
    let size = review({ labels: {}, annotations: { pad: '' } }).length + 64
    for (let i = 0; ; i++) {
      const key = `flood.example.com/label-${i}`
      const value = `value-${i}`
      size += key.length + value.length + 6
      if (size > bytes) break
      labels[key] = value
    }
  }
  const short = bytes - review({ labels, annotations: { pad: '' } }).length
  const text = review({ labels, annotations: { pad: 'x'.repeat(short) } })
  return Buffer.from(text)
}

async function flood(clients: number, bytes: number, shape: string, ca: string): Promise<object> {
  const body = floodBody(bytes, shape)
  const statuses: Record<string, number> = {}
  let errors = 0
  let sentBytes = 0
  const worker = async (): Promise<void> => {
    let client = new Client(`https://127.0.0.1:${port}`, { connect: { ca, servername: 'localhost' }, pipelining: 1, headersTimeout: 30_000, bodyTimeout: 30_000 })
    while (performance.now() < deadline) {
      try {
        const response = await client.request({ path: '/validate', method: 'POST', headers: { 'content-type': 'application/json' }, body })
        await response.body.dump()
        statuses[response.statusCode] = (statuses[response.statusCode] ?? 0) + 1
        if (response.statusCode === 200) sentBytes += body.length
      } catch {
        errors++
        await client.destroy().catch(() => undefined)
        client = new Client(`https://127.0.0.1:${port}`, { connect: { ca, servername: 'localhost' }, pipelining: 1, headersTimeout: 30_000, bodyTimeout: 30_000 })
      }
    }
    await client.destroy().catch(() => undefined)
  }
  await Promise.all(Array.from({ length: clients }, worker))
  return { bodyBytes: body.length, statuses, errors, reviewedMiB: Math.round(sentBytes / 1024 / 1024) }
}

type Kind = 'tcp-idle' | 'tls-idle' | 'slow-headers' | 'slow-body'

async function slow(connections: number, ca: string): Promise<object> {
  const kinds: Kind[] = ['tcp-idle', 'tls-idle', 'slow-headers', 'slow-body']
  const stats = Object.fromEntries(kinds.map((kind) => [kind, { opened: 0, closedByServer: 0, lifetimesMs: [] as number[], refusedAtConnect: 0 }]))
  const open = (kind: Kind): void => {
    if (performance.now() >= deadline) return
    const stat = stats[kind]!
    stat.opened++
    const openedAt = performance.now()
    let timer: NodeJS.Timeout | undefined
    let socket: Socket
    const drip = (prefix: string, text: string): void => {
      socket.write(prefix)
      let at = 0
      timer = setInterval(() => { socket.write(text[at++ % text.length]!) }, 1000)
    }
    if (kind === 'tcp-idle') {
      socket = tcpConnect(port, '127.0.0.1')
    } else {
      socket = tlsConnect({ port, host: '127.0.0.1', ca, servername: 'localhost' }, () => {
        if (kind === 'slow-headers') drip('POST /validate HTTP/1.1\r\nHost: localhost\r\n', 'X-Slow: still-coming\r\n')
        if (kind === 'slow-body') drip('POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n', '{"apiVersion": "admission.k8s.io/v1", ')
      })
    }
    socket.on('data', () => undefined)
    socket.on('error', () => undefined)
    socket.on('close', () => {
      clearInterval(timer)
      const lived = performance.now() - openedAt
      if (performance.now() < deadline) {
        stat.closedByServer++
        if (lived < 50) stat.refusedAtConnect++
        else stat.lifetimesMs.push(lived)
        // Keep the number of connections up, as an attacker would; a little later if refused at once.
        setTimeout(() => { open(kind) }, lived < 50 ? 100 : 0)
      }
    })
    setTimeout(() => { socket.destroy() }, Math.max(0, deadline - performance.now())).unref()
  }
  // Opened over two seconds rather than all at once.
  for (let i = 0; i < connections; i++) {
    open(kinds[i % kinds.length]!)
    if (i % 50 === 49) await new Promise((resolve) => setTimeout(resolve, 100))
  }
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, deadline - performance.now()) + 200))
  return Object.fromEntries(Object.entries(stats).map(([kind, stat]) => {
    const sorted = stat.lifetimesMs.sort((a, b) => a - b)
    return [kind, { opened: stat.opened, closedByServer: stat.closedByServer, refusedAtConnect: stat.refusedAtConnect, medianLifetimeS: sorted.length > 0 ? Math.round(sorted[Math.floor(sorted.length / 2)]!) / 1000 : null }]
  }))
}

let result: object
if (mode === 'flood') {
  const [clients, bytes, shape, caFile] = rest
  result = await flood(Number(clients), Number(bytes), shape!, readFileSync(caFile!, 'utf8'))
} else if (mode === 'slow') {
  const [connections, caFile] = rest
  result = await slow(Number(connections), readFileSync(caFile!, 'utf8'))
} else {
  throw new Error(`unknown mode ${mode ?? ''}`)
}
process.stdout.write(JSON.stringify(result) + '\n')
process.exit(0)
