// Plain-HTTP GETs to the webhook's health port on this machine.

import { request } from 'node:http'

export function httpGet(url: string, timeoutMs = 5000): Promise<{ status: number, text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'GET' }, (response) => {
      const chunks: Buffer[] = []
      response.on('data', (chunk: Buffer) => chunks.push(chunk))
      response.on('end', () => {
        resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') })
      })
      response.on('error', reject)
    })
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`GET ${url} timed out`)))
    req.on('error', reject)
    req.end()
  })
}
