// Reading ServiceCIDRs and IPAddresses from files (src/cluster/files.ts): the shapes kubectl and the
// API print, and every problem named by file, document and item.

import t from 'tap'
import { buildClusterState, readManifests, readObjects, type FileObjects } from '../../../src/cluster/files.ts'

function objects(text: string, file = 'f.yaml'): FileObjects {
  const read = readObjects(text, file)
  if (!read.ok) throw new Error(read.error)
  return read.value
}

const names = (file: FileObjects): [string[], string[]] => [
  file.serviceCIDRs.map(({ object }) => object.metadata?.name ?? ''),
  file.ipAddresses.map(({ object }) => object.metadata?.name ?? ''),
]

const serviceCIDR = (name: string, cidrs: string, version = 'v1'): string =>
  `apiVersion: networking.k8s.io/${version}\nkind: ServiceCIDR\nmetadata: {name: ${name}}\nspec: {cidrs: [${cidrs}]}\n`

t.test('multi-document YAML, empty documents skipped but counted', (t) => {
  const file = objects(`---\n${serviceCIDR('a', '10.0.0.0/24')}---\n---\n${serviceCIDR('b', '10.0.1.0/24', 'v1alpha1')}`)
  t.strictSame(names(file), [['a', 'b'], []])
  t.strictSame(file.serviceCIDRs.map(({ location }) => location), [
    { file: 'f.yaml', document: 1, item: undefined },
    { file: 'f.yaml', document: 3, item: undefined },
  ])
  t.strictSame(file.serviceCIDRs[1]?.object, { metadata: { name: 'b', labels: undefined, deletionTimestamp: undefined }, spec: { cidrs: ['10.0.1.0/24'] } })
  t.strictSame(names(objects('')), [[], []], 'an empty file holds nothing')
  t.end()
})

t.test('the API\'s own ServiceCIDRList and IPAddressList: items without kind and apiVersion', (t) => {
  const file = objects(JSON.stringify({
    apiVersion: 'networking.k8s.io/v1beta1',
    kind: 'IPAddressList',
    metadata: { resourceVersion: '42' },
    items: [{ metadata: { name: '10.0.0.1', labels: { 'ipaddress.kubernetes.io/ip-family': 'IPv4' } }, spec: { parentRef: { group: '', resource: 'services', namespace: 'ns', name: 'web' } } }],
  }), 'list.json')
  t.strictSame(names(file), [[], ['10.0.0.1']])
  t.strictSame(file.ipAddresses[0]?.location, { file: 'list.json', document: 1, item: 0 })
  t.strictSame(file.ipAddresses[0]?.object.spec, { parentRef: { group: '', resource: 'services', namespace: 'ns', name: 'web' } })
  const cidrs = objects('apiVersion: networking.k8s.io/v1\nkind: ServiceCIDRList\nitems:\n- metadata: {name: a}\n  spec: {cidrs: [10.0.0.0/24]}\n')
  t.strictSame(names(cidrs), [['a'], []])
  t.end()
})

t.test('a deletionTimestamp marks the ServiceCIDR Terminating', (t) => {
  const built = buildClusterState([objects('apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: a, deletionTimestamp: "2026-11-28T16:40:12Z"}\nspec: {cidrs: [10.0.0.0/24]}\n')])
  t.ok(built.ok)
  if (built.ok) t.equal(built.value.serviceCIDR('a')?.deleting, true)
  t.end()
})

t.test('JSON with a syntax error is reported by the YAML parser, with a line', (t) => {
  const read = readObjects('{"kind": "ServiceCIDR",\n  "metadata": {"name": "a"}\n', 'bad.json')
  t.notOk(read.ok)
  if (!read.ok) t.match(read.error, /^bad\.json, document 1: not valid YAML: .* at line 3/)
  t.end()
})

t.test('every malformed object is an error naming the file, document and item', (t) => {
  const cases: [string, string, string | RegExp][] = [
    ['a scalar document', 'just text\n', 'f.yaml, document 1: expected a ServiceCIDR or IPAddress of networking.k8s.io (v1, v1beta1, v1alpha1), or a List of them; found a string'],
    ['a top-level list', '- a\n- b\n', 'f.yaml, document 1: expected a ServiceCIDR or IPAddress of networking.k8s.io (v1, v1beta1, v1alpha1), or a List of them; found a list'],
    ['a null item', 'apiVersion: v1\nkind: List\nitems: [null, 3]\n', 'f.yaml, document 1, items[0]: expected a ServiceCIDR or IPAddress of networking.k8s.io (v1, v1beta1, v1alpha1), or a List of them; found null'],
    ['a name that is not a string', 'apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: 123}\nspec: {cidrs: [10.0.0.0/24]}\n', 'f.yaml, document 1: ServiceCIDR: metadata.name must be a string, not a number'],
    ['another group', 'apiVersion: networking.example.com/v1\nkind: ServiceCIDR\nmetadata: {name: a}\n', 'f.yaml, document 1: expected a ServiceCIDR or IPAddress of networking.k8s.io (v1, v1beta1, v1alpha1), or a List of them; found ServiceCIDR networking.example.com/v1'],
    ['an unknown version', 'apiVersion: networking.k8s.io/v2\nkind: ServiceCIDR\nmetadata: {name: a}\n', 'found ServiceCIDR networking.k8s.io/v2'],
    ['no kind', 'metadata: {name: a}\n', 'found (no kind) (no apiVersion)'],
    ['a List item of another kind', 'apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: p}}\n', 'f.yaml, document 1, items[0]: expected a ServiceCIDR or IPAddress of networking.k8s.io (v1, v1beta1, v1alpha1), or a List of them; found Pod v1'],
    ['a List in a List', 'apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: List, items: []}\n', 'f.yaml, document 1, items[0]: expected a ServiceCIDR or IPAddress'],
    ['a list of another kind', 'apiVersion: v1\nkind: ServiceList\nitems: []\n', 'found ServiceList v1'],
    ['items not a list', 'apiVersion: v1\nkind: List\nitems: {a: 1}\n', 'f.yaml, document 1: List: items must be a list'],
    ['no name', 'apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {}\nspec: {cidrs: [10.0.0.0/24]}\n', 'f.yaml, document 1: ServiceCIDR has no metadata.name'],
    ['cidrs not strings', `---\n${serviceCIDR('a', '10.0.0.0/24')}---\napiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: b}\nspec: {cidrs: [1, 2]}\n`, 'f.yaml, document 2: ServiceCIDR "b": spec.cidrs must be a list of strings'],
    ['spec not an object', 'apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: a}\nspec: [1]\n', 'f.yaml, document 1: ServiceCIDR "a": spec must be an object'],
    ['labels not strings', 'apiVersion: networking.k8s.io/v1\nkind: IPAddress\nmetadata: {name: 10.0.0.1, labels: {a: {b: c}}}\n', 'f.yaml, document 1: IPAddress "10.0.0.1": metadata.labels must map strings to strings'],
    ['parentRef not strings', 'apiVersion: networking.k8s.io/v1\nkind: IPAddress\nmetadata: {name: 10.0.0.1}\nspec: {parentRef: {name: [x]}}\n', 'f.yaml, document 1: IPAddress "10.0.0.1": spec.parentRef must have string fields (group, resource, namespace, name)'],
    ['duplicate keys', 'kind: ServiceCIDR\nkind: IPAddress\n', 'f.yaml, document 1: not valid YAML: duplicated mapping key at line 2, column 1'],
    // The error is met while the third document is read: it was named as the second.
    ['a syntax error in the third document', `${serviceCIDR('a', '10.0.0.0/24')}---\n${serviceCIDR('b', '10.0.1.0/24')}---\nkind: ServiceCIDR\nspec: {cidrs: [10.0.2.0/24\n`, /^f\.yaml, document 3: not valid YAML: .* at line 1[0-9], column/],
  ]
  for (const [name, text, error] of cases) {
    const read = readObjects(text, 'f.yaml')
    t.notOk(read.ok, name)
    if (!read.ok) t.match(read.error, error, name)
  }
  t.end()
})

t.test('cluster files: names must be unique and valid, CIDRs must parse', (t) => {
  const a = objects(serviceCIDR('a', '10.0.0.0/24'), 'one.yaml')
  const again = objects(`---\n${serviceCIDR('b', '10.0.1.0/24')}---\n${serviceCIDR('a', '10.0.2.0/24')}`, 'two.yaml')
  const twice = buildClusterState([a, again])
  t.strictSame(twice, { ok: false, error: 'two.yaml, document 2: ServiceCIDR "a" is also in one.yaml, document 1' })
  const ip = (name: string) => `apiVersion: networking.k8s.io/v1\nkind: IPAddress\nmetadata: {name: "${name}"}\n`
  t.strictSame(buildClusterState([objects(`${ip('10.0.0.1')}---\n${ip('10.0.0.1')}`, 'ips.yaml')]), { ok: false, error: 'ips.yaml, document 2: IPAddress "10.0.0.1" is also in ips.yaml, document 1' })
  t.strictSame(buildClusterState([objects(ip('010.0.0.1'), 'ips.yaml')]), { ok: false, error: 'ips.yaml, document 1: IPAddress "010.0.0.1" is not named as Kubernetes names one: must not have leading 0s' })
  // One address spelled two ways would count twice; kube-apiserver keeps only the canonical name.
  t.strictSame(buildClusterState([objects(`${ip('fd00::5')}---\n${ip('fd00:0::5')}`, 'ips.yaml')]), { ok: false, error: 'ips.yaml, document 2: IPAddress "fd00:0::5" is not named as Kubernetes names one: must be in canonical form ("fd00::5")' })
  t.strictSame(buildClusterState([objects(ip('FD00::5'), 'ips.yaml')]), { ok: false, error: 'ips.yaml, document 1: IPAddress "FD00::5" is not named as Kubernetes names one: must be in canonical form ("fd00::5")' })
  t.strictSame(buildClusterState([objects(ip('::ffff:10.0.0.1'), 'ips.yaml')]), { ok: false, error: 'ips.yaml, document 1: IPAddress "::ffff:10.0.0.1" is not named as Kubernetes names one: must not be an IPv4-mapped IPv6 address' })
  t.strictSame(buildClusterState([objects(ip('web'), 'ips.yaml')]), { ok: false, error: 'ips.yaml, document 1: IPAddress "web" is not named as Kubernetes names one: must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)' })
  t.strictSame(buildClusterState([objects(serviceCIDR('a', '10.0.0.0/33'), 'c.yaml')]), { ok: false, error: 'c.yaml, document 1: ServiceCIDR "a" has CIDR "10.0.0.0/33", which must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)' })
  const built = buildClusterState([a, objects(`${ip('10.0.0.1')}---\n${ip('fd00::1')}`)])
  t.ok(built.ok)
  if (built.ok) {
    t.equal(built.value.serviceCIDRCount, 1)
    t.equal(built.value.ipAddressCount, 2)
  }
  t.end()
})

t.test('manifests hold ServiceCIDRs only', (t) => {
  const read = readManifests([objects(serviceCIDR('a', '10.0.0.0/24')), objects('apiVersion: networking.k8s.io/v1\nkind: IPAddress\nmetadata: {name: 10.0.0.1}\n', 'ip.yaml')])
  t.strictSame(read, { ok: false, error: 'ip.yaml, document 1: a manifest may hold only ServiceCIDRs; IPAddress "10.0.0.1" belongs in a --cluster file' })
  const fine = readManifests([objects(serviceCIDR('a', '10.0.0.0/24')), objects(serviceCIDR('b', 'x'))])
  t.ok(fine.ok)
  if (fine.ok) t.strictSame(fine.value.map(({ object }) => object.spec?.cidrs), [['10.0.0.0/24'], ['x']], 'invalid CIDRs are left for the engine to deny')
  t.end()
})
