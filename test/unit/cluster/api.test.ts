// API discovery and LISTs against a stand-in for kube-apiserver: the version chosen is one that
// serves servicecidrs, not merely one of networking.k8s.io (whose v1 every cluster serves for
// Ingress and NetworkPolicy); a page that does not come is given up.

import t from 'tap'
import { setTimeout as delay } from 'node:timers/promises'
import { APINotServedError, ListError, apiURL, discoverVersion, listAll } from '../../../src/cluster/api.ts'
import { standIn } from '../../support/apiserver.ts'

/** Discovery of a cluster serving these networking.k8s.io versions, each with these resources. */
function discovery(served: Record<string, string[]>) {
  return standIn((request) => {
    if (request.url === '/apis') {
      const versions = Object.keys(served).map((version) => ({ groupVersion: `networking.k8s.io/${version}`, version }))
      return { status: 200, body: { kind: 'APIGroupList', apiVersion: 'v1', groups: [{ name: 'networking.k8s.io', versions, preferredVersion: versions[0] }] } }
    }
    const version = /^\/apis\/networking\.k8s\.io\/([^/?]+)$/.exec(request.url ?? '')?.[1]
    const resources = version === undefined ? undefined : served[version]
    if (version === undefined || resources === undefined) return { status: 404, body: { kind: 'Status', code: 404, message: 'the server could not find the requested resource' } }
    return {
      status: 200,
      body: { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: `networking.k8s.io/${version}`, resources: resources.map((name) => ({ name, singularName: '', namespaced: false, kind: 'X', verbs: ['get'] })) },
    }
  })
}

const v1Always = ['networkpolicies', 'ingresses', 'ingresses/status', 'ingressclasses']
const serviceCIDRs = ['servicecidrs', 'servicecidrs/status', 'ipaddresses']

t.test('discoverVersion: the newest version that serves servicecidrs', async (t) => {
  const cases: { name: string, served: Record<string, string[]>, want: string }[] = [
    { name: '1.33+: v1', served: { v1: [...v1Always, ...serviceCIDRs], v1beta1: serviceCIDRs }, want: 'v1' },
    { name: '1.31/1.32 with the beta enabled: v1beta1, though v1 is served for Ingress', served: { v1: v1Always, v1beta1: [...serviceCIDRs, 'ingresses'] }, want: 'v1beta1' },
    { name: '1.30 with the alpha enabled: v1alpha1', served: { v1: v1Always, v1alpha1: serviceCIDRs }, want: 'v1alpha1' },
  ]
  for (const { name, served, want } of cases) {
    const apiserver = await discovery(served)
    t.equal(await discoverVersion(apiserver.kubeConfig), want, name)
    await apiserver.close()
  }
})

t.test('discoverVersion: a cluster whose networking.k8s.io serves no servicecidrs says so', async (t) => {
  const cases: { name: string, served: Record<string, string[]>, versions: string }[] = [
    { name: '1.30: v1 for Ingress only', served: { v1: v1Always }, versions: 'v1' },
    { name: '1.28 with the alpha enabled: v1alpha1 serves only ipaddresses', served: { v1: v1Always, v1alpha1: ['ipaddresses'] }, versions: 'v1, v1alpha1' },
  ]
  for (const { name, served, versions } of cases) {
    const apiserver = await discovery(served)
    await t.rejects(discoverVersion(apiserver.kubeConfig), new APINotServedError(
      `the cluster serves no ServiceCIDR API (networking.k8s.io versions: ${versions}, none with servicecidrs); ` +
        'Kubernetes 1.33+ serves v1; 1.31 and 1.32 need the MultiCIDRServiceAllocator feature gate and networking.k8s.io/v1beta1 enabled',
    ), name)
    await apiserver.close()
  }
})

// A healthy kube-apiserver ends every LIST within its --request-timeout (1 min); a page that does not
// come (a connection to an apiserver that died) must not hold the cache for undici's 5 minutes.
t.test('listAll: a page that does not come within the page timeout is an error', async (t) => {
  const apiserver = await standIn((request) => ((request.url ?? '').includes('continue=') ? undefined : { status: 200, body: { metadata: { resourceVersion: '5', continue: 'next' }, items: [] } }))
  t.teardown(() => apiserver.close())
  const resource = { group: 'networking.k8s.io', version: 'v1', plural: 'ipaddresses' } as const
  const listing = listAll(apiserver.kubeConfig, resource, () => undefined, 5000, undefined, 200)
  const outcome = await Promise.race([listing.then(() => 'listed', (error: unknown) => error), delay(2000, 'still waiting')])
  t.ok(outcome instanceof ListError, 'rejected with a ListError')
  t.equal((outcome as Error).message, 'listing ipaddresses: no answer within 0.2 s')
  t.equal(apiserver.requests.length, 2, 'the first page came; the second did not')
})

// Rancher's cluster proxy, an API gateway or kubectl proxy --api-prefix put the API under a path: a
// LIST keeps it, as the Lease's requests do (lease.test.ts).
t.test('apiURL and listAll keep the path of the kubeconfig\'s server', async (t) => {
  t.equal(apiURL('https://gw.example/k8s/clusters/c-m-1/', '/apis/x'), 'https://gw.example/k8s/clusters/c-m-1/apis/x')
  t.equal(apiURL('https://10.0.0.1:6443', '/apis/x'), 'https://10.0.0.1:6443/apis/x')
  const apiserver = await standIn(() => ({ status: 200, body: { metadata: { resourceVersion: '7' }, items: [] } }))
  t.teardown(() => apiserver.close())
  const cluster = apiserver.kubeConfig.getCurrentCluster()
  apiserver.kubeConfig.loadFromOptions({
    clusters: [{ name: 'c', server: `${cluster?.server ?? ''}/k8s/clusters/c-m-1/`, skipTLSVerify: true }],
    users: [{ name: 'u', token: 'the-token' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  })
  const resource = { group: 'networking.k8s.io', version: 'v1', plural: 'servicecidrs' } as const
  t.equal(await listAll(apiserver.kubeConfig, resource, () => undefined), '7')
  t.same(apiserver.requests, ['/k8s/clusters/c-m-1/apis/networking.k8s.io/v1/servicecidrs?limit=5000'])
})
