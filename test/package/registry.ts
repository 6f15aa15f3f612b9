// A throwaway npm registry for the package test: just enough of the registry API that `npm publish`
// and `npx servicecidr-guard@VERSION` work against it as against registry.npmjs.org.
// - PUT /<name>: a publish (the packument with the tarball as a base64 attachment); kept in memory.
// - GET /<name>, /<name>/-/<file>.tgz: what was published here.
// - GET of any other package, metadata or tarball: fetched from the upstream registry, as it is (npm
//   asks here for tarballs too: it rewrites registry.npmjs.org in tarball URLs to the registry it is
//   configured with).
// Listens on loopback only.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'

interface Published {
  readonly packument: Record<string, unknown>
  readonly tarballs: Map<string, Buffer>
}

async function body(request: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of request) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

function send(response: ServerResponse, status: number, value: unknown, type = 'application/json'): void {
  const payload = Buffer.isBuffer(value) ? value : Buffer.from(JSON.stringify(value))
  response.writeHead(status, { 'content-type': type, 'content-length': payload.length })
  response.end(payload)
}

export interface LocalRegistry {
  readonly url: string
  /** Names of the packages whose metadata was proxied upstream, for the test to report. */
  readonly proxied: Set<string>
  close(): Promise<void>
}

export async function startRegistry(port: number, upstream: string): Promise<LocalRegistry> {
  const published = new Map<string, Published>()
  const proxied = new Set<string>()
  let url = ''

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const path = decodeURIComponent((request.url ?? '/').split('?')[0] ?? '/')
    const tarball = /^\/((?:@[^/]+\/)?[^/]+)\/-\/([^/]+\.tgz)$/.exec(path)
    if (request.method === 'PUT') {
      const name = path.slice(1)
      const document = JSON.parse((await body(request)).toString('utf8')) as {
        versions: Record<string, { dist: { tarball: string } }>
        'dist-tags': Record<string, string>
        _attachments: Record<string, { data: string }>
      }
      const tarballs = new Map<string, Buffer>()
      for (const [file, attachment] of Object.entries(document._attachments)) tarballs.set(file, Buffer.from(attachment.data, 'base64'))
      for (const manifest of Object.values(document.versions)) {
        // Served from here, whatever URL the client wrote.
        manifest.dist.tarball = `${url}/${name}/-/${manifest.dist.tarball.split('/').pop() ?? ''}`
      }
      const packument: Record<string, unknown> = { ...document }
      delete packument['_attachments']
      published.set(name, { packument, tarballs })
      send(response, 201, { ok: true })
      return
    }
    if (request.method !== 'GET') {
      send(response, 405, { error: 'method not allowed' })
      return
    }
    const local = published.get(tarball === null ? path.slice(1) : tarball[1] ?? '')
    if (local !== undefined) {
      const data = tarball === null ? undefined : local.tarballs.get(tarball[2] ?? '')
      if (tarball === null) send(response, 200, local.packument)
      else if (data === undefined) send(response, 404, { error: 'not found' })
      else send(response, 200, data, 'application/octet-stream')
      return
    }
    if (tarball === null) proxied.add(path.slice(1))
    const upstreamPath = tarball === null ? path.slice(1).replace('/', '%2f') : path.slice(1)
    const answer = await fetch(`${upstream.replace(/\/$/, '')}/${upstreamPath}`, {
      headers: { accept: request.headers.accept ?? 'application/json' },
    })
    send(response, answer.status, Buffer.from(await answer.arrayBuffer()), answer.headers.get('content-type') ?? 'application/json')
  }

  const server: Server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      send(response, 502, { error: String(error) })
    })
  })
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
  const address = server.address() as { port: number }
  url = `http://127.0.0.1:${String(address.port)}`
  return {
    url,
    proxied,
    close: () => new Promise((resolve) => {
      server.closeAllConnections()
      server.close(() => {
        resolve()
      })
    }),
  }
}
