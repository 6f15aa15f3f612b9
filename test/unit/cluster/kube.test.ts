// How a failed request to a cluster reads in an audit row: the apiserver's own message, whichever
// client made the request.

import t from 'tap'
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
