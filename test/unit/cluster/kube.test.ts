// How a failed request to a cluster reads in an audit row: the apiserver's own message, whichever
// client made the request.

import t from 'tap'
import { ApiException } from '@kubernetes/client-node'
import { ListError, statusMessage } from '../../../src/cluster/api.ts'
import { describeClusterError } from '../../../src/cluster/kube.ts'

const forbidden = JSON.stringify({
  kind: 'Status',
  apiVersion: 'v1',
  status: 'Failure',
  message: 'ipaddresses.networking.k8s.io is forbidden: User "system:serviceaccount:default:nobody" cannot list resource "ipaddresses"',
  reason: 'Forbidden',
  code: 403,
}) + '\n'

t.test('statusMessage: the Status message, else the start of the text', (t) => {
  t.equal(statusMessage(forbidden), 'ipaddresses.networking.k8s.io is forbidden: User "system:serviceaccount:default:nobody" cannot list resource "ipaddresses"')
  t.equal(statusMessage('upstream connect error\n'), 'upstream connect error')
  t.equal(statusMessage('x'.repeat(300)).length, 200)
  t.end()
})

// A load balancer or auth proxy in front of the apiserver answers with a page of HTML: one line,
// so that an error stays one line and a fleet audit one row a cluster.
const badGateway = '<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n'

t.test('statusMessage: a body of many lines reads as one', (t) => {
  t.equal(statusMessage(badGateway), '<html> <head><title>502 Bad Gateway</title></head> <body> <center><h1>502 Bad Gateway</h1></center> <hr><center>nginx</center> </body> </html>')
  t.equal(statusMessage(JSON.stringify({ kind: 'Status', message: 'first\n  second' })), 'first second')
  const long = statusMessage(`${'word '.repeat(100)}\n`)
  t.equal(long.length, 200)
  t.ok(long.endsWith('…'), 'a cut is shown')
  t.end()
})

t.test('a request refused by a proxy (client-node) reads as one line', (t) => {
  const line = describeClusterError(new ApiException(502, 'Bad Gateway', badGateway, {}), 'https://10.0.0.1')
  t.equal(line, 'https://10.0.0.1: HTTP 502: <html> <head><title>502 Bad Gateway</title></head> <body> <center><h1>502 Bad Gateway</h1></center> <hr><center>nginx</center> </body> </html>')
  t.equal(describeClusterError(new ApiException(403, 'Forbidden', forbidden, {}), 'https://10.0.0.1'),
    'https://10.0.0.1: HTTP 403: ipaddresses.networking.k8s.io is forbidden: User "system:serviceaccount:default:nobody" cannot list resource "ipaddresses"')
  t.equal(describeClusterError(new ApiException(500, 'x', '', {}), 'https://10.0.0.1'), 'https://10.0.0.1: HTTP 500')
  t.end()
})

t.test('a LIST refused by the apiserver reads as HTTP status and its message, on one line', (t) => {
  const error = new ListError('listing ipaddresses: HTTP 403: ...', 403, statusMessage(forbidden))
  t.equal(
    describeClusterError(error, 'https://10.0.0.1'),
    'https://10.0.0.1: HTTP 403: ipaddresses.networking.k8s.io is forbidden: User "system:serviceaccount:default:nobody" cannot list resource "ipaddresses"',
  )
  t.end()
})

t.test('a ListError without a status (no cluster in the kubeconfig) reads as its message', (t) => {
  t.equal(describeClusterError(new ListError('the kubeconfig names no cluster'), ''), ': the kubeconfig names no cluster')
  t.end()
})

// A credential plugin that fails is client-node's Error with the plugin's standard error as its
// message, lines and all: one row a cluster in a fleet audit, so one line here.
t.test('an error of many lines (a credential plugin\'s standard error) reads as one', (t) => {
  t.equal(describeClusterError(new Error('error: token expired\nrun: gcloud auth login\n'), 'https://10.0.0.1'), 'https://10.0.0.1: error: token expired run: gcloud auth login')
  const refused = new TypeError('fetch failed', { cause: Object.assign(new Error('certificate\nhas expired'), { code: 'CERT_HAS_EXPIRED' }) })
  t.equal(describeClusterError(refused, 'https://10.0.0.1'), 'https://10.0.0.1: cannot connect: CERT_HAS_EXPIRED: certificate has expired')
  t.equal(describeClusterError('a\r\nb', 'https://10.0.0.1'), 'https://10.0.0.1: a b')
  t.end()
})
