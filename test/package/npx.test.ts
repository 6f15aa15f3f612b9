// The package as a team installs it, without a clone of this repository: `npm pack`, `npm publish`
// to a throwaway registry on loopback (test/package/registry.ts; dependencies come from the real one),
// then in an empty directory `npx servicecidr-guard@VERSION check ...`, the kubectl plugin form, and
// the clear refusal of a Node.js older than 24.
//
// Why a registry and not `npm install ./the.tgz`: installing a tarball skips what a user's `npx
// servicecidr-guard@VERSION` does (resolve the name and version through registry metadata, install
// into npx's cache, pick the bin named like the package), and `npm publish` itself refuses a package
// marked private. The registry publishes and serves only this package; every other name is proxied
// to the registry npm is configured with, so the dependencies are the ones users get.
//
//   npm run test:package      (NPM_REGISTRY_PORT picks the registry's port; default: any free one)
//
// Needs the network to the npm registry (or an npm cache that holds the dependencies' tarballs).

import { execFile } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, dirname, join } from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { startRegistry } from './registry.ts'

const run = promisify(execFile)
const root = join(import.meta.dirname, '../..')
const { name, version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { name: string, version: string }
const node24 = join(root, 'node_modules/.bin/node')

interface Ran { readonly code: number, readonly stdout: string, readonly stderr: string }

async function sh(command: string, args: readonly string[], options: { cwd: string, env: NodeJS.ProcessEnv }): Promise<Ran> {
  try {
    const { stdout, stderr } = await run(command, args, { ...options, timeout: 300_000, maxBuffer: 16 << 20 })
    return { code: 0, stdout, stderr }
  } catch (error) {
    const { code, stdout, stderr } = error as { code?: unknown, stdout?: string, stderr?: string }
    if (typeof code !== 'number') throw error
    return { code, stdout: stdout ?? '', stderr: stderr ?? '' }
  }
}

/** The first file called `file` below `dir`. */
function find(dir: string, file: string): string | undefined {
  if (!existsSync(dir)) return undefined
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.name === file) return path
    if (entry.isDirectory()) {
      const found = find(path, file)
      if (found !== undefined) return found
    }
  }
  return undefined
}

const work = mkdtempSync(join(tmpdir(), 'servicecidr-guard-package-'))
const upstream = (await sh('npm', ['config', 'get', 'registry'], { cwd: root, env: process.env })).stdout.trim() || 'https://registry.npmjs.org/'
const registry = await startRegistry(Number(process.env['NPM_REGISTRY_PORT'] ?? 0), upstream)
t.teardown(async () => {
  await registry.close()
  rmSync(work, { recursive: true, force: true })
})

// Each npm command with its own user config and an empty cache: nothing comes from this machine's
// npm setup but the upstream registry's address.
const npmrc = join(work, 'npmrc')
writeFileSync(npmrc, `registry=${registry.url}/\n//${registry.url.replace(/^http:\/\//, '')}/:_authToken=package-test\n`)
const npmEnv = (path: string): NodeJS.ProcessEnv => ({
  ...process.env,
  PATH: path,
  npm_config_userconfig: npmrc,
  npm_config_cache: join(work, 'cache'),
  npm_config_update_notifier: 'false',
  npm_config_fund: 'false',
  npm_config_audit: 'false',
  npm_config_yes: 'true',
})
const withNode24 = [dirname(node24), process.env['PATH'] ?? ''].join(delimiter)

let tarball = ''

t.test('npm pack: the command, the compiled code and the policy schema; no sources, tests or maps', async (t) => {
  const packed = await sh('npm', ['pack', '--json', '--pack-destination', work], { cwd: root, env: { ...process.env, PATH: withNode24 } })
  t.equal(packed.code, 0, `npm pack (which builds first) ${packed.stderr}`)
  const [result] = JSON.parse(packed.stdout) as { filename: string, files: { path: string }[] }[]
  if (result === undefined) throw new Error('npm pack printed no result')
  tarball = join(work, result.filename)
  const files = result.files.map((entry) => entry.path)
  for (const needed of ['package.json', 'README.md', 'bin/servicecidr-guard.js', 'dist/main.js', 'dist/cli/program.js', 'dist/config/policy.schema.json']) {
    t.ok(files.includes(needed), `packs ${needed}`)
  }
  t.strictSame(files.filter((path) => /^(src|test|bench|hack|config|node_modules)\/|\.map$|\.ts$/.test(path)), [], 'nothing else')
  t.comment(`${result.filename}: ${String(files.length)} files`)
})

t.test('npm publish to the registry: the package is publishable', async (t) => {
  const published = await sh('npm', ['publish', tarball], { cwd: work, env: npmEnv(withNode24) })
  t.equal(published.code, 0, `npm publish: ${published.stderr.split('\n').filter((line) => /ERR|error/i.test(line)).join(' ')}`)
  const packument = await fetch(`${registry.url}/${name}`).then(async (response) => response.json() as Promise<{ 'dist-tags': { latest: string } }>)
  t.equal(packument['dist-tags'].latest, version, `${name}@${version} is served`)
})

const project = join(work, 'project')
mkdirSync(project)
writeFileSync(join(project, 'policy.yaml'), 'apiVersion: servicecidr-guard/v1alpha1\nkind: Policy\nspec:\n  allowedRanges: [10.96.0.0/12]\n')
writeFileSync(join(project, 'inside.yaml'), 'apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: inside}\nspec: {cidrs: [10.97.0.0/24]}\n')
writeFileSync(join(project, 'outside.yaml'), 'apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: outside}\nspec: {cidrs: [192.168.0.0/24]}\n')

t.test(`npx ${name}@${version} check, in an empty directory`, async (t) => {
  const admitted = await sh('npx', [`${name}@${version}`, 'check', '--policy', 'policy.yaml', 'inside.yaml'], { cwd: project, env: npmEnv(withNode24) })
  t.equal(admitted.code, 0, `exit 0 (${admitted.stderr.trim()})`)
  t.match(admitted.stdout, /^ADMITTED CREATE ServiceCIDR "inside" 10\.97\.0\.0\/24 \(inside\.yaml, document 1\)\n/)
  const denied = await sh('npx', [`${name}@${version}`, 'check', '--policy', 'policy.yaml', 'outside.yaml'], { cwd: project, env: npmEnv(withNode24) })
  t.equal(denied.code, 1, 'exit 1: denied')
  t.match(denied.stdout, 'AllowedRanges: spec.cidrs[0] 192.168.0.0/24 is outside the allowed IPv4 ranges (10.96.0.0/12)')
  const shown = await sh('npx', [`${name}@${version}`, '--version'], { cwd: project, env: npmEnv(withNode24) })
  t.equal(shown.stdout, `${version}\n`, 'the version of the package')
  t.comment(`dependencies resolved through the upstream registry: ${String(registry.proxied.size)} packages`)
})

t.test('the kubectl plugin form: kubectl-servicecidr_guard on PATH', async (t) => {
  const plugin = find(join(work, 'cache'), 'kubectl-servicecidr_guard')
  t.ok(plugin, `npx installed the bin kubectl-servicecidr_guard (${String(plugin)})`)
  if (plugin === undefined) return
  const direct = await sh(plugin, ['check', '--policy', 'policy.yaml', 'inside.yaml'], { cwd: project, env: { ...process.env, PATH: withNode24 } })
  t.equal(direct.code, 0, 'it runs the same command')
  const kubectl = process.env['KUBECTL'] ?? (await sh(join(root, 'hack/control-plane/find-kubectl.sh'), [], { cwd: root, env: process.env })).stdout.trim()
  if (kubectl === '' || !existsSync(kubectl)) {
    t.comment('no kubectl here (KUBECTL, or hack/control-plane/find-kubectl.sh): `kubectl servicecidr-guard` itself not run')
    return
  }
  const path = [dirname(plugin), withNode24].join(delimiter)
  const listed = await sh(kubectl, ['plugin', 'list'], { cwd: project, env: { ...process.env, PATH: path } })
  t.match(listed.stdout, /kubectl-servicecidr_guard/, 'kubectl plugin list finds it')
  const viaKubectl = await sh(kubectl, ['servicecidr-guard', 'check', '--policy', 'policy.yaml', 'outside.yaml'], { cwd: project, env: { ...process.env, PATH: path } })
  t.equal(viaKubectl.code, 1, '`kubectl servicecidr-guard check` runs it, exit code and all')
  t.match(viaKubectl.stdout, /^DENIED CREATE ServiceCIDR "outside"/)
})

t.test('on a Node.js older than 24: one clear sentence, exit 1', async (t) => {
  // OLD_NODE, or the first node on PATH outside this repository (npm run puts Node 24 first).
  const older = process.env['OLD_NODE'] ?? (process.env['PATH'] ?? '').split(delimiter)
    .filter((dir) => dir !== '' && !dir.startsWith(root))
    .map((dir) => join(dir, 'node'))
    .find((candidate) => existsSync(candidate)) ?? ''
  const olderVersion = older === '' ? '' : (await sh(older, ['--version'], { cwd: work, env: process.env })).stdout.trim()
  if (!/^v(1\d|2[0-3])\./.test(olderVersion)) {
    t.comment(`${older || 'no node'} is ${olderVersion || 'missing'}, not older than 24: nothing to try (OLD_NODE=/path/to/node names one)`)
    return
  }
  const ran = await sh('npx', [`${name}@${version}`, 'check', '--policy', 'policy.yaml', 'inside.yaml'], { cwd: project, env: npmEnv([dirname(older), process.env['PATH'] ?? ''].join(delimiter)) })
  t.equal(ran.code, 1)
  t.match(ran.stderr, `servicecidr-guard needs Node.js 24 or later; this is Node.js ${olderVersion}`)
  t.equal(ran.stdout, '')
})
