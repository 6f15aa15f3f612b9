// The serving certificate, reloaded when cert-manager rewrites the mounted Secret. A new pair is
// checked (parses, key matches) before it replaces the old one; a half-written pair is ignored
// until the next poll, so no handshake ever gets a broken context.

import { X509Certificate, createPrivateKey } from 'node:crypto'
import { createSecureContext, type SecureContextOptions } from 'node:tls'
import { watchFiles, type FileWatch } from '../config/file-watch.ts'

export const minTLSVersion = 'TLSv1.2'

export interface KeyPair {
  readonly cert: Buffer
  readonly key: Buffer
  readonly notAfter: Date
  readonly subject: string
}

export function checkKeyPair(cert: Buffer, key: Buffer): KeyPair {
  const x509 = new X509Certificate(cert)
  if (!x509.checkPrivateKey(createPrivateKey(key))) throw new Error('the private key does not match the certificate')
  createSecureContext({ cert, key, minVersion: minTLSVersion })
  return { cert, key, notAfter: new Date(x509.validTo), subject: x509.subject }
}

export const secureContextOptions = (pair: KeyPair): SecureContextOptions => ({
  cert: pair.cert,
  key: pair.key,
  minVersion: minTLSVersion,
})

export interface CertificateEvents {
  onLoad(pair: KeyPair, first: boolean): void
  onError(message: string): void
}

export class CertificateSource {
  private pair: KeyPair | undefined
  private readonly watch: FileWatch
  reloads = 0

  /** Starts polling; `current` is undefined until a valid pair has been read. */
  constructor(certPath: string, keyPath: string, intervalMs: number, events: CertificateEvents) {
    this.watch = watchFiles([certPath, keyPath], intervalMs, ([cert, key]) => {
      try {
        if (cert === undefined || key === undefined) throw new Error('missing file')
        // The pair in force, read again (after the files were unreadable for a poll): no reload.
        if (this.pair !== undefined && this.pair.cert.equals(cert) && this.pair.key.equals(key)) return
        const pair = checkKeyPair(cert, key)
        const first = this.pair === undefined
        this.pair = pair
        if (!first) this.reloads++
        events.onLoad(pair, first)
      } catch (error) {
        events.onError(`cannot use ${certPath} and ${keyPath}: ${error instanceof Error ? error.message : String(error)}`)
      }
    }, (error) => {
      events.onError(`cannot read ${certPath} and ${keyPath}: ${error instanceof Error ? error.message : String(error)}`)
    })
  }

  get current(): KeyPair | undefined {
    return this.pair
  }

  stop(): void {
    this.watch.stop()
  }
}
