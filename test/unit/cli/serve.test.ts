// serve's flags for the shared reservations: where the Lease is (by default in the Pod's own
// namespace), switching it off, and the checks that refuse a setting that cannot work.

import t from 'tap'
import { execFile, execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { defaultReservationLease, sharedReservation } from '../../../src/cli/serve.ts'
import { podNamespace, serviceAccountNamespaceFile } from '../../../src/cluster/kube.ts'
import { root, run } from '../../helpers/cli.ts'

const flags = { sharedReservation: true, reservationTtl: 10, reservationDeadline: 3 }

t.test('the Lease: --reservation-lease, else the Pod\'s namespace and the shipped name; off with --no-shared-reservation', (t) => {
  t.equal(defaultReservationLease, 'servicecidr-guard-reservations')
  t.same(sharedReservation(flags, () => 'servicecidr-guard-system'), { namespace: 'servicecidr-guard-system', name: 'servicecidr-guard-reservations', deadlineMs: 3000 })
  t.same(sharedReservation({ ...flags, reservationLease: { namespace: 'ops', name: 'guard' } }, () => undefined), { namespace: 'ops', name: 'guard', deadlineMs: 3000 }, 'the flag needs no namespace from the Pod')
  t.equal(sharedReservation({ ...flags, sharedReservation: false }, () => undefined), undefined, 'off: per replica only')
  t.throws(() => sharedReservation(flags, () => undefined), {
    message: 'cannot tell which namespace holds the shared reservation Lease: pass --reservation-lease NAMESPACE/NAME (or set POD_NAMESPACE), or --no-shared-reservation to reserve per replica only',
  }, 'outside a Pod without the flag: a clear error, not a guess')
  t.throws(() => sharedReservation({ ...flags, reservationTtl: 3 }, () => 'ns'), {
    message: '--reservation-ttl (3 s) must be longer than --reservation-deadline (3 s): a reservation must outlive the review that made it',
  })
  t.end()
})

t.test('podNamespace: POD_NAMESPACE (the Downward API), else the service account\'s namespace file', (t) => {
  const files: Record<string, string> = { [serviceAccountNamespaceFile]: 'from-file\n' }
  const read = (path: string): string => {
    const text = files[path]
    if (text === undefined) throw new Error(`ENOENT: ${path}`)
    return text
  }
  t.equal(podNamespace({ POD_NAMESPACE: ' from-env ' }, read), 'from-env')
  t.equal(podNamespace({}, read), 'from-file')
  t.equal(podNamespace({ POD_NAMESPACE: '' }, read), 'from-file', 'an empty variable does not count')
  t.equal(podNamespace({}, () => { throw new Error('ENOENT') }), undefined, 'outside a Pod')
  t.end()
})

t.test('a --reservation-lease that is not NAMESPACE/NAME is a usage error', async (t) => {
  for (const value of ['just-a-name', 'a/b/c', 'Upper/name', '/name', 'ns/']) {
    const { code, stderr } = await run(['serve', '--reservation-lease', value])
    t.equal(code, 2, value)
    t.match(stderr, `error: option '--reservation-lease <namespace/name>' argument '${value}' is invalid. must be NAMESPACE/NAME of a Lease`)
  }
})

t.test('a --reload-interval of 0 is a usage error, not files read back to back', async (t) => {
  const { code, stderr } = await run(['serve', '--reload-interval', '0'])
  t.equal(code, 2)
  t.match(stderr, "error: option '--reload-interval <seconds>' argument '0' is invalid. must be a number of seconds above 0")
})

t.test('a time past a day is a usage error, not a timer that fires at once', async (t) => {
  for (const flag of ['--reservation-deadline', '--shutdown-delay', '--stale-after']) {
    const { code, stderr } = await run(['serve', flag, '2147484'])
    t.equal(code, 2, flag)
    t.match(stderr, `error: option '${flag} <seconds>' argument '2147484' is invalid. must be a number of seconds, at most 86400 (a day)`)
  }
})

t.test('a port that cannot be listened on ends serve with exit 2 and one line, whichever port it is', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'scg-serve-cli-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=localhost',
    '-keyout', join(dir, 'tls.key'), '-out', join(dir, 'tls.crt')], { stdio: 'ignore' })
  writeFileSync(join(dir, 'policy.yaml'), 'apiVersion: servicecidr-guard/v1alpha1\nkind: Policy\nspec: {}\n')
  writeFileSync(join(dir, 'kubeconfig'), 'apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "https://127.0.0.1:9"}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n')
  const taken = createServer()
  await new Promise<void>((resolve) => { taken.listen(0, '127.0.0.1', resolve) })
  t.teardown(() => { taken.close() })
  const port = String((taken.address() as AddressInfo).port)
  const serve = (ports: string[]): Promise<{ code: number | null, stderr: string }> => new Promise((resolve) => {
    const args = ['src/main.ts', 'serve', '--policy', join(dir, 'policy.yaml'), '--tls-cert', join(dir, 'tls.crt'), '--tls-key', join(dir, 'tls.key'),
      '--kubeconfig', join(dir, 'kubeconfig'), '--host', '127.0.0.1', '--no-shared-reservation', '--shutdown-delay', '0', ...ports]
    execFile(process.execPath, args, { cwd: root, timeout: 15_000 }, (error, _stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : null, stderr })
    })
  })
  for (const [which, ports] of [['webhook', ['--port', port, '--health-port', '0']], ['health', ['--port', '0', '--health-port', port]]] as const) {
    const { code, stderr } = await serve([...ports])
    t.equal(code, 2, `${which} port in use: exit 2, not left running or killed by the timeout`)
    t.equal(stderr, `servicecidr-guard: listen EADDRINUSE: address already in use 127.0.0.1:${port}\n`, `${which} port in use: one line, no stack trace`)
  }
})
