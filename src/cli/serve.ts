// `servicecidr-guard serve`: the admission webhook.

import { Command, InvalidArgumentError, Option } from 'commander'
import { loadKubeConfig, podNamespace } from '../cluster/kube.ts'
import { serve } from '../server/serve.ts'
import { maxSeconds } from './input.ts'
import { serverLogger } from './logger.ts'

/** The Lease config/manager ships, in the webhook's own namespace. */
export const defaultReservationLease = 'servicecidr-guard-reservations'

function port(value: string): number {
  const parsed = Number(value)
  if (!Number.isInteger(parsed) || parsed < 0 || parsed > 65535) throw new InvalidArgumentError('must be a port number (0-65535)')
  return parsed
}

function seconds(value: string): number {
  const parsed = Number(value)
  if (!Number.isFinite(parsed) || parsed < 0 || parsed > maxSeconds) throw new InvalidArgumentError(`must be a number of seconds, at most ${String(maxSeconds)} (a day)`)
  return parsed
}

/** An interval: 0 would poll the files back to back (about a third of a core, measured). */
function interval(value: string): number {
  const parsed = seconds(value)
  if (parsed === 0) throw new InvalidArgumentError('must be a number of seconds above 0')
  return parsed
}

/** A DNS-1123 label, as namespaces are; Lease names are DNS subdomains, which this is one of. */
const dnsLabel = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/

function lease(value: string): { namespace: string, name: string } {
  const [namespace = '', name = '', ...rest] = value.split('/')
  if (rest.length > 0 || !dnsLabel.test(namespace) || !/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(name)) {
    throw new InvalidArgumentError('must be NAMESPACE/NAME of a Lease')
  }
  return { namespace, name }
}

/** Where the shared reservations are, from the flags; throws when that cannot be told. */
export function sharedReservation(flags: Pick<Flags, 'sharedReservation' | 'reservationLease' | 'reservationDeadline' | 'reservationTtl'>, namespace: () => string | undefined = podNamespace): { namespace: string, name: string, deadlineMs: number } | undefined {
  if (flags.reservationTtl <= flags.reservationDeadline) {
    throw new Error(`--reservation-ttl (${String(flags.reservationTtl)} s) must be longer than --reservation-deadline (${String(flags.reservationDeadline)} s): a reservation must outlive the review that made it`)
  }
  if (!flags.sharedReservation) return undefined
  const where = flags.reservationLease ?? (() => {
    const found = namespace()
    if (found === undefined) {
      throw new Error('cannot tell which namespace holds the shared reservation Lease: pass --reservation-lease NAMESPACE/NAME (or set POD_NAMESPACE), or --no-shared-reservation to reserve per replica only')
    }
    return { namespace: found, name: defaultReservationLease }
  })()
  return { ...where, deadlineMs: flags.reservationDeadline * 1000 }
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
  reservationLease?: { namespace: string, name: string }
  reservationDeadline: number
  sharedReservation: boolean
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
    .option('--reload-interval <seconds>', 'how often the policy and certificate files are checked for changes', interval, 2)
    .option('--shutdown-delay <seconds>', 'after SIGTERM, keep serving while unready so endpoints drop this pod', seconds, 5)
    .option('--shutdown-timeout <seconds>', 'then, how long in-flight reviews may take to finish', seconds, 15)
    .option('--reservation-ttl <seconds>', 'how long an admitted range counts for overlap checks, on this replica and in the shared Lease, if the watch does not show it first (2 x the webhook\'s timeoutSeconds of 5)', seconds, 10)
    .option('--reservation-lease <namespace/name>', `the Lease where every replica records the ranges it admits (default: the Pod's namespace, from POD_NAMESPACE or the service account, and ${defaultReservationLease})`, lease)
    .option('--reservation-deadline <seconds>', 'how long a review may take to record its range there before it fails closed (well inside the webhook\'s timeoutSeconds of 5)', seconds, 3)
    .option('--no-shared-reservation', 'reserve admitted ranges on this replica only: two replicas can then each admit one of two overlapping ranges created at the same moment')
    .option('--stale-after <seconds>', 'how long the cache may go without being shown current by its watches before the replica reports not ready and reviews that need it fail closed (reviews stop trusting it sooner: after the reservation TTL\'s margin past the webhook timeout, 5 s, they wait for the watch first)', seconds, 30)
    .action(async (flags: Flags) => {
      const { logger, decisions, close } = serverLogger(flags.logLevel)
      const running = await serve({
        policyPath: flags.policy,
        certPath: flags.tlsCert,
        keyPath: flags.tlsKey,
        host: flags.host,
        port: flags.port,
        healthPort: flags.healthPort,
        kubeConfig: loadKubeConfig(flags.kubeconfig),
        logger,
        decisions,
        reloadIntervalMs: flags.reloadInterval * 1000,
        shutdownDelayMs: flags.shutdownDelay * 1000,
        shutdownTimeoutMs: flags.shutdownTimeout * 1000,
        reservationMs: flags.reservationTtl * 1000,
        sharedReservation: sharedReservation(flags),
        staleAfterMs: flags.staleAfter * 1000,
      })
      await new Promise<void>((resolve, reject) => {
        const stop = (signal: NodeJS.Signals): void => {
          void running.shutdown(signal).then(resolve)
        }
        process.once('SIGTERM', stop)
        process.once('SIGINT', stop)
        // The webhook port cannot be listened on (in use, say): stop, then fail with one line.
        running.listening.catch((error: unknown) => {
          void running.shutdown('the webhook cannot listen').then(() => { reject(error instanceof Error ? error : new Error(String(error))) })
        })
      })
      close()
    })
}
