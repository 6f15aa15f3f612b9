// `servicecidr-guard serve`: the admission webhook.

import { Command, InvalidArgumentError, Option } from 'commander'
import { loadKubeConfig } from '../cluster/kube.ts'
import { serve } from '../server/serve.ts'
import { serverLogger } from './logger.ts'

function port(value: string): number {
  const parsed = Number(value)
  if (!Number.isInteger(parsed) || parsed < 0 || parsed > 65535) throw new InvalidArgumentError('must be a port number (0-65535)')
  return parsed
}

function seconds(value: string): number {
  const parsed = Number(value)
  if (!Number.isFinite(parsed) || parsed < 0) throw new InvalidArgumentError('must be a number of seconds')
  return parsed
}

interface Flags {
  policy: string
  tlsCert: string
  tlsKey: string
  host: string
  port: number
  healthPort: number
  kubeconfig?: string
  logLevel: string
  reloadInterval: number
  shutdownDelay: number
  shutdownTimeout: number
  reservationTtl: number
  staleAfter: number
}

export function serveCommand(): Command {
  return new Command('serve')
    .description('Run the validating admission webhook (HTTPS POST /validate; /livez, /readyz, /metrics).')
    .option('--policy <file>', 'policy file (YAML or JSON); reloaded when it changes', '/etc/servicecidr-guard/policy/policy.yaml')
    .option('--tls-cert <file>', 'serving certificate (PEM); reloaded when it changes', '/etc/servicecidr-guard/tls/tls.crt')
    .option('--tls-key <file>', 'serving key (PEM)', '/etc/servicecidr-guard/tls/tls.key')
    .option('--host <address>', 'address to listen on', '0.0.0.0')
    .option('--port <port>', 'HTTPS port of the webhook', port, 9443)
    .option('--health-port <port>', 'plain-HTTP port for /livez, /readyz and /metrics (0: any free port)', port, 8081)
    .option('--kubeconfig <file>', 'kubeconfig (default: in-cluster, else $KUBECONFIG or ~/.kube/config)')
    .addOption(new Option('--log-level <level>', 'log level').choices(['fatal', 'error', 'warn', 'info', 'debug', 'trace']).default('info'))
    .option('--reload-interval <seconds>', 'how often the policy and certificate files are checked for changes', seconds, 2)
    .option('--shutdown-delay <seconds>', 'after SIGTERM, keep serving while unready so endpoints drop this pod', seconds, 5)
    .option('--shutdown-timeout <seconds>', 'then, how long in-flight reviews may take to finish', seconds, 15)
    .option('--reservation-ttl <seconds>', 'how long an admitted CREATE counts for overlap checks before the watch shows it', seconds, 30)
    .option('--stale-after <seconds>', 'how long the cache may go without a working watch before reviews that need it fail closed', seconds, 30)
    .action(async (flags: Flags) => {
      const { logger, close } = serverLogger(flags.logLevel)
      const running = await serve({
        policyPath: flags.policy,
        certPath: flags.tlsCert,
        keyPath: flags.tlsKey,
        host: flags.host,
        port: flags.port,
        healthPort: flags.healthPort,
        kubeConfig: loadKubeConfig(flags.kubeconfig),
        logger,
        reloadIntervalMs: flags.reloadInterval * 1000,
        shutdownDelayMs: flags.shutdownDelay * 1000,
        shutdownTimeoutMs: flags.shutdownTimeout * 1000,
        reservationMs: flags.reservationTtl * 1000,
        staleAfterMs: flags.staleAfter * 1000,
      })
      await new Promise<void>((resolve) => {
        const stop = (signal: NodeJS.Signals): void => {
          void running.shutdown(signal).then(resolve)
        }
        process.once('SIGTERM', stop)
        process.once('SIGINT', stop)
      })
      close()
    })
}
