// processIO's cluster access as a fleet audit uses it, against real sockets on loopback: a refused
// connection and a server that never answers are each one clear line, and the deadline really ends
// the request, or the credential plugin that has not returned (the command would otherwise hang on a
// dead cluster, or a login).

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type Server, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { ClusterAccessError, processIO } from '../../../src/cli/io.ts'

function kubeconfig(dir: string, servers: Record<string, string>): string {
  const path = join(dir, 'kubeconfig')
  const names = Object.keys(servers)
  writeFileSync(path, JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: names.map((name) => ({ name, cluster: { server: servers[name], 'insecure-skip-tls-verify': true } })),
    users: [{ name: 'nobody', user: {} }],
    contexts: names.map((name) => ({ name, context: { cluster: name, user: 'nobody' } })),
    'current-context': names[0],
  }))
  return path
}

async function failure(promise: Promise<unknown>): Promise<string> {
  try {
    await promise
  } catch (error) {
    if (error instanceof ClusterAccessError) return error.message
    throw error
  }
  throw new Error('expected a ClusterAccessError')
}

t.test('contexts, a refused connection, and a server that never answers within the deadline', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'servicecidr-guard-io-'))
  // Accepts connections and never answers: what a half-dead apiserver or a black-holed route looks like.
  const sockets: Socket[] = []
  const silent: Server = createServer((socket) => sockets.push(socket))
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
  const { port } = silent.address() as { port: number }
  // A port that was free a moment ago: nothing listens there.
  const closed = createServer()
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
  const { port: closedPort } = closed.address() as { port: number }
  await new Promise((resolve) => closed.close(resolve))
  t.teardown(() => {
    for (const socket of sockets) socket.destroy()
    silent.close()
    rmSync(dir, { recursive: true, force: true })
  })
  const path = kubeconfig(dir, { refused: `https://127.0.0.1:${String(closedPort)}`, silent: `https://127.0.0.1:${String(port)}` })
  const io = processIO()
  t.strictSame(io.contexts(path), [
    { name: 'refused', server: `https://127.0.0.1:${String(closedPort)}` },
    { name: 'silent', server: `https://127.0.0.1:${String(port)}` },
  ])
  t.equal(await failure(io.readCluster({ kubeconfig: path, context: 'refused', timeoutMs: 5000 })),
    `https://127.0.0.1:${String(closedPort)}: cannot connect: ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:${String(closedPort)}`)
  const started = performance.now()
  t.equal(await failure(io.readCluster({ kubeconfig: path, context: 'silent', timeoutMs: 300 })), `https://127.0.0.1:${String(port)}: no answer within 0.3 s`)
  t.ok(performance.now() - started < 3000, 'given up at the deadline')
  t.equal(await failure(io.applyReport({ kubeconfig: path, context: 'silent', timeoutMs: 300 }, { metadata: { name: 'r' } })), `https://127.0.0.1:${String(port)}: no answer within 0.3 s`, 'so is applying a report')
  t.equal(await failure(io.readCluster({ kubeconfig: path, context: 'nope', timeoutMs: 300 })), 'the kubeconfig has no context "nope" (it has: refused, silent)')
  t.equal(await failure(io.readCluster({ kubeconfig: join(dir, 'missing'), context: undefined, timeoutMs: 300 })).then((message) => message.includes('missing')), true, 'a missing kubeconfig names the file')
})

// A credential plugin (users[].user.exec) waiting for a login that does not come: client-node runs
// it before the first request and takes no signal, so the deadline must end the read without it.
t.test('a credential plugin that does not return is given up at the deadline', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'servicecidr-guard-io-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  const path = join(dir, 'kubeconfig')
  writeFileSync(path, JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'c', cluster: { server: 'https://127.0.0.1:9', 'insecure-skip-tls-verify': true } }],
    users: [{ name: 'sso', user: { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: 'sleep', args: ['3'], interactiveMode: 'Never' } } }],
    contexts: [{ name: 'waits', context: { cluster: 'c', user: 'sso' } }],
  }))
  const started = performance.now()
  t.equal(await failure(processIO().readCluster({ kubeconfig: path, context: 'waits', timeoutMs: 300 })), 'https://127.0.0.1:9: no answer within 0.3 s')
  t.ok(performance.now() - started < 2000, 'given up at the deadline, not when the plugin ends')
})
