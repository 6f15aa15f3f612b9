// Finding and reading a kubeconfig: as kubectl finds it, and every problem one line that names the
// file and says what to do, never client-node's made-up http://localhost:8080.

import t from 'tap'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadKubeConfig, readKubeConfig, serverOf } from '../../../src/cluster/kube.ts'

const dir = mkdtempSync(join(tmpdir(), 'scg-kubeconfig-'))
t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })

const write = (name: string, text: string | Buffer): string => {
  const path = join(dir, name)
  writeFileSync(path, text)
  return path
}

/** A kubeconfig with one context per cluster; `current` is its current-context, if any. */
const kubeconfig = (clusters: Record<string, string>, current?: string, extra = ''): string => [
  'apiVersion: v1',
  'kind: Config',
  'clusters:',
  ...Object.entries(clusters).map(([name, server]) => `- {name: ${name}, cluster: {server: "${server}"${extra}}}`),
  'users:',
  ...Object.keys(clusters).map((name) => `- {name: ${name}, user: {token: t}}`),
  'contexts:',
  ...Object.keys(clusters).map((name) => `- {name: ${name}, context: {cluster: ${name}, user: ${name}}}`),
  ...(current === undefined ? [] : [`current-context: ${current}`]),
  '',
].join('\n')

const emptyHome = join(dir, 'home')
mkdirSync(emptyHome)
const noEnv = {}

t.test('nothing configured: the reason, not a request to http://localhost:8080', (t) => {
  t.throws(() => loadKubeConfig(undefined, noEnv, emptyHome), {
    message: `no Kubernetes cluster configured: pass --kubeconfig, set KUBECONFIG, or run in a cluster (there is no ${join(emptyHome, '.kube', 'config')})`,
  })
  t.throws(() => loadKubeConfig(undefined, { KUBECONFIG: join(dir, 'missing-a') }, emptyHome), {
    message: `no Kubernetes cluster configured: pass --kubeconfig, set KUBECONFIG, or run in a cluster (no file that KUBECONFIG lists exists: ${join(dir, 'missing-a')})`,
  })
  t.end()
})

t.test('~/.kube/config when nothing else is given', (t) => {
  const home = join(dir, 'home-with-config')
  mkdirSync(join(home, '.kube'), { recursive: true })
  writeFileSync(join(home, '.kube', 'config'), kubeconfig({ a: 'https://10.0.0.1:6443' }, 'a'))
  t.equal(serverOf(loadKubeConfig(undefined, noEnv, home)), 'https://10.0.0.1:6443')
  t.end()
})

t.test('a file that cannot be read: one line naming the kubeconfig', (t) => {
  t.throws(() => loadKubeConfig(dir), { message: `cannot read the kubeconfig ${dir}: is a directory, not a file` })
  t.throws(() => loadKubeConfig(join(dir, 'nope')), { message: `cannot read the kubeconfig ${join(dir, 'nope')}: no such file` })
  const binary = write('binary', Buffer.from([0x61, 0x3a, 0x20, 0x00, 0x0a, 0xff, 0xfe, 0x0a, 0x01, 0x02, 0x0a]))
  let message = ''
  try {
    loadKubeConfig(binary)
  } catch (error) {
    message = (error as Error).message
  }
  t.match(message, new RegExp(`^cannot read the kubeconfig ${binary}: `))
  t.notMatch(message, /\n/, 'one line: no snippet of the file')
  t.end()
})

t.test('KUBECONFIG: missing files skipped, the first file to name something wins, as kubectl merges', (t) => {
  const first = write('first', kubeconfig({ a: 'https://10.0.0.1:6443' }))
  const second = write('second', kubeconfig({ a: 'https://10.9.9.9:6443', b: 'https://10.0.0.2:6443' }, 'b'))
  const env = { KUBECONFIG: [join(dir, 'missing'), first, second].join(':') }
  const merged = readKubeConfig(undefined, env, emptyHome).config
  t.same(merged.getContexts().map((context) => context.name), ['a', 'b'])
  t.equal(merged.getCurrentContext(), 'b', 'current-context from the first file that sets it')
  t.equal(merged.getCluster('a')?.server, 'https://10.0.0.1:6443', 'cluster a from the first file')
  t.end()
})

t.test('a kubeconfig without current-context reads for a fleet; read alone, it says what to do', (t) => {
  const fleet = write('fleet', kubeconfig({ east: 'https://10.0.0.1:6443', west: 'https://10.0.0.2:6443' }))
  t.same(readKubeConfig(fleet).config.getContexts().map((context) => context.name), ['east', 'west'])
  t.throws(() => loadKubeConfig(fleet), { message: `the kubeconfig ${fleet} sets no current-context: set one, or name contexts with --context` })
  const empty = write('no-contexts', 'apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\n')
  t.throws(() => loadKubeConfig(empty), { message: `the kubeconfig ${empty} has no contexts` })
  const dangling = write('dangling', `${kubeconfig({ east: 'https://10.0.0.1:6443' })}current-context: gone\n`)
  t.throws(() => loadKubeConfig(dangling), { message: `the kubeconfig ${dangling} names no cluster for context "gone"` })
  t.end()
})

t.test('a plain HTTP server (kubectl proxy) is refused with what to do instead', (t) => {
  const proxy = write('proxy', kubeconfig({ proxy: 'http://127.0.0.1:8001' }, 'proxy'))
  t.throws(() => loadKubeConfig(proxy), { message: 'http://127.0.0.1:8001 is plain HTTP: servicecidr-guard reads an API server over HTTPS only (not through kubectl proxy); use the kubeconfig that kubectl itself uses' })
  const insecure = write('insecure', kubeconfig({ proxy: 'http://127.0.0.1:8001' }, 'proxy', ', insecure-skip-tls-verify: true'))
  t.equal(serverOf(loadKubeConfig(insecure)), 'http://127.0.0.1:8001', 'unless the kubeconfig turns TLS verification off, as client-node allows')
  t.end()
})

// `kubectl config set-context scratch --namespace=dev` writes a context with no cluster; client-node
// refused the whole file for it, kubectl uses the other contexts. The invalid one, asked for, says why.
t.test('an invalid context is left out, the others read; asked for, it says what is wrong', (t) => {
  const scratch = '- {name: scratch, context: {cluster: "", user: "", namespace: dev}}\n- {name: bare}\n'
  const mixed = write('mixed', kubeconfig({ east: 'https://10.0.0.1:6443' }, 'east').replace('contexts:\n', `contexts:\n${scratch}`))
  const loaded = readKubeConfig(mixed)
  t.same(loaded.config.getContexts().map((context) => context.name), ['east'])
  t.strictSame([...loaded.invalidContexts], [
    ['scratch', 'the kubeconfig\'s context "scratch" names no cluster (contexts[0].context.cluster is empty): set one with kubectl config set-context scratch --cluster NAME'],
    ['bare', 'the kubeconfig\'s context "bare" is empty (contexts[1] has no context)'],
  ])
  t.equal(serverOf(loadKubeConfig(mixed)), 'https://10.0.0.1:6443')
  const current = write('current-scratch', `${kubeconfig({ east: 'https://10.0.0.1:6443' }).replace('contexts:\n', `contexts:\n${scratch}`)}current-context: scratch\n`)
  t.throws(() => loadKubeConfig(current), { message: 'the kubeconfig\'s context "scratch" names no cluster (contexts[0].context.cluster is empty): set one with kubectl config set-context scratch --cluster NAME' },
    'the current context, not "names no cluster for context"')
  const env = { KUBECONFIG: [mixed, write('later', kubeconfig({ scratch: 'https://10.9.9.9:6443' }))].join(':') }
  t.equal(readKubeConfig(undefined, env, emptyHome).invalidContexts.has('scratch'), true, 'merged, the first file to name a context wins, invalid or not')
  t.end()
})
