// `check` run in-process over the fixtures: exit codes, text and exact JSON, ordering, deletions,
// standard input, and every input error.

import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import t from 'tap'
import { fixture, run } from '../../helpers/cli.ts'

const gke = ['check', '--policy', fixture.gkePolicy, '--cluster', fixture.gkeCluster]

const decision = (fields: Record<string, unknown>): Record<string, unknown> => ({
  operation: 'CREATE',
  file: null,
  document: null,
  item: null,
  allowed: true,
  bypass: null,
  violations: [],
  warnings: [],
  message: '',
  suggestion: '',
  ...fields,
})

const result = (decisions: Record<string, unknown>[], username = 'servicecidr-guard:check', groups: string[] = []): Record<string, unknown> => ({
  apiVersion: 'servicecidr-guard/v1alpha1',
  kind: 'CheckResult',
  user: { username, groups },
  decisions,
  summary: {
    admitted: decisions.filter((entry) => entry['allowed'] === true).length,
    denied: decisions.filter((entry) => entry['allowed'] === false).length,
  },
})

t.test('a manifest inside the allowed range and free is admitted: exit 0', async (t) => {
  const { code, stdout, stderr } = await run([...gke, fixture.manifest('single.yaml')])
  t.equal(code, 0)
  t.equal(stderr, '')
  t.equal(stdout, [
    'ADMITTED CREATE ServiceCIDR "extra-b" 34.118.229.0/24 (test/fixtures/manifests/single.yaml, document 1)',
    '',
    '1 request checked as servicecidr-guard:check: 1 admitted, 0 denied',
    '',
  ].join('\n'))
})

t.test('manifests are checked in order: of two overlapping ones the first is admitted, the second denied', async (t) => {
  const { code, stdout } = await run([...gke, fixture.manifest('multi.yaml'), '-o', 'json'])
  t.equal(code, 1)
  const overlap = 'spec.cidrs[0] 34.118.230.128/25 overlaps ServiceCIDR "extra-c" (34.118.230.0/24)'
  t.strictSame(JSON.parse(stdout), result([
    decision({ name: 'extra-c', cidrs: ['34.118.230.0/24'], file: fixture.manifest('multi.yaml'), document: 1 }),
    decision({
      name: 'extra-d',
      cidrs: ['34.118.230.128/25'],
      file: fixture.manifest('multi.yaml'),
      document: 2,
      allowed: false,
      violations: [{ rule: 'Overlap', field: 'spec.cidrs[0]', message: overlap }],
      message: `ServiceCIDR "extra-d" is not allowed by the servicecidr-guard policy: ${overlap}. 34.118.229.0/25 is free and the policy admits it.`,
      suggestion: '34.118.229.0/25 is free and the policy admits it.',
    }),
  ]))
})

t.test('the order of the files is the order of the checks', async (t) => {
  // extra-c (from multi.yaml) was admitted in the test above only because it came first; here a
  // ServiceCIDR admitted from single.yaml takes 34.118.229.0/24 before the List's outside range is
  // denied, so the free range suggested moves on.
  const { code, stdout } = await run([...gke, fixture.manifest('single.yaml'), fixture.manifest('list.yaml')])
  t.equal(code, 1)
  t.equal(stdout, [
    'ADMITTED CREATE ServiceCIDR "extra-b" 34.118.229.0/24 (test/fixtures/manifests/single.yaml, document 1)',
    '',
    'ADMITTED CREATE ServiceCIDR "extra-e" 34.118.231.0/24 (test/fixtures/manifests/list.yaml, document 1, items[0])',
    '',
    'DENIED CREATE ServiceCIDR "outside" 10.100.0.0/24 (test/fixtures/manifests/list.yaml, document 1, items[1])',
    '  - AllowedRanges: spec.cidrs[0] 10.100.0.0/24 is outside the allowed IPv4 ranges (34.118.224.0/20)',
    '  hint: 34.118.230.0/24 is free and the policy admits it.',
    '',
    '3 requests checked as servicecidr-guard:check: 2 admitted, 1 denied',
    '',
  ].join('\n'))
})

t.test('a JSON manifest of networking.k8s.io/v1beta1 is read', async (t) => {
  const { code, stdout } = await run([...gke, fixture.manifest('servicecidr.json'), '-o', 'json'])
  t.equal(code, 0)
  t.strictSame(JSON.parse(stdout), result([
    decision({ name: 'extra-g', cidrs: ['34.118.232.0/28'], file: fixture.manifest('servicecidr.json'), document: 1 }),
  ]))
})

t.test('an invalid CIDR is a ValidCIDR denial, as the engine reports it, not an input error', async (t) => {
  const { code, stdout, stderr } = await run([...gke, fixture.manifest('invalid-cidr.yaml'), '-o', 'json'])
  t.equal(code, 1)
  t.equal(stderr, '')
  const invalid = 'spec.cidrs[0]: Invalid value: "34.118.233.1/24": must not have bits set beyond the prefix length'
  t.strictSame(JSON.parse(stdout), result([
    decision({
      name: 'sloppy',
      cidrs: ['34.118.233.1/24'],
      file: fixture.manifest('invalid-cidr.yaml'),
      document: 1,
      allowed: false,
      violations: [{ rule: 'ValidCIDR', field: 'spec.cidrs[0]', message: invalid }],
      message: `ServiceCIDR "sloppy" is not allowed by the servicecidr-guard policy: ${invalid}.`,
    }),
  ]))
})

t.test('an invalid CIDR is denied even when the policy only warns: the apiserver refuses it', async (t) => {
  const dir = t.testdir()
  const policy = join(dir, 'warn.yaml')
  await writeFile(policy, 'apiVersion: servicecidr-guard/v1alpha1\nkind: Policy\nspec:\n  allowedRanges: [34.118.224.0/20]\n  enforcement: Warn\n')
  const invalid = await run(['check', '--policy', policy, fixture.manifest('invalid-cidr.yaml')])
  t.equal(invalid.code, 1)
  t.match(invalid.stdout, /^DENIED CREATE ServiceCIDR "sloppy"/)
  const outside = await run(['check', '--policy', policy, fixture.manifest('list.yaml')])
  t.equal(outside.code, 0, 'a policy violation under Warn is admitted')
  t.match(outside.stdout, /ADMITTED CREATE ServiceCIDR "outside" 10\.100\.0\.0\/24 .*\n {2}- AllowedRanges \(not enforced\): spec\.cidrs\[0\] 10\.100\.0\.0\/24 is outside/)
})

t.test('--delete: a ServiceCIDR still holding addresses is denied, a free one admitted', async (t) => {
  const { code, stdout } = await run([...gke, '--delete', 'extra-a', '--delete', 'extra-free'])
  t.equal(code, 1)
  t.equal(stdout, [
    'DENIED DELETE ServiceCIDR "extra-a" 34.118.228.0/24 (--delete)',
    '  - InUse: ServiceCIDR "extra-a" still has 2 allocated addresses that no other ServiceCIDR covers: Service shop/cart (34.118.228.10), ' +
      'Service shop/checkout (34.118.228.11). Move them off it first: delete those Services and re-create them once the range is gone ' +
      "(no ServiceCIDR can cover them instead: it would overlap this one, which the policy's overlap: Deny refuses); then delete again. " +
      'Until then Kubernetes would keep the ServiceCIDR Terminating',
    '',
    'ADMITTED DELETE ServiceCIDR "extra-free" 34.118.236.0/24 (--delete)',
    '',
    '2 requests checked as servicecidr-guard:check: 1 admitted, 1 denied',
    '',
  ].join('\n'))
  const free = await run([...gke, '--delete', 'extra-free', '-o', 'json'])
  t.equal(free.code, 0)
  t.strictSame(JSON.parse(free.stdout), result([decision({ operation: 'DELETE', name: 'extra-free', cidrs: ['34.118.236.0/24'] })]))
})

t.test('--delete is checked after the manifests: a covering ServiceCIDR created first frees the old one', async (t) => {
  const dir = t.testdir()
  const cover = join(dir, 'cover.yaml')
  await writeFile(cover, 'apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: extra-a-bigger}\nspec: {cidrs: [34.118.228.0/23]}\n')
  // The policy denies overlaps, so the covering range is refused and the deletion stays blocked.
  const denied = await run([...gke, '--delete', 'extra-a', cover])
  t.equal(denied.code, 1)
  t.match(denied.stdout, /^DENIED CREATE ServiceCIDR "extra-a-bigger"[^]*\n\nDENIED DELETE ServiceCIDR "extra-a"/)
  // Under a policy that allows expansion it is admitted, and then extra-a may go.
  const expansion = join(dir, 'expansion.yaml')
  await writeFile(expansion, 'apiVersion: servicecidr-guard/v1alpha1\nkind: Policy\nspec:\n  overlap: AllowExpansion\n')
  const admitted = await run(['check', '--policy', expansion, '--cluster', fixture.gkeCluster, '--delete', 'extra-a', cover])
  t.equal(admitted.code, 0, admitted.stdout)
  t.match(admitted.stdout, /^ADMITTED CREATE ServiceCIDR "extra-a-bigger"[^]*\n\nADMITTED DELETE ServiceCIDR "extra-a"/)
})

t.test('two deletions that cover each other: once the first is admitted, the second is checked without it', async (t) => {
  const dir = t.testdir()
  const cluster = join(dir, 'twins.yaml')
  await writeFile(cluster, `apiVersion: v1
kind: List
items:
- {apiVersion: networking.k8s.io/v1, kind: ServiceCIDR, metadata: {name: twin-1}, spec: {cidrs: [10.0.0.0/24]}}
- {apiVersion: networking.k8s.io/v1, kind: ServiceCIDR, metadata: {name: twin-2}, spec: {cidrs: [10.0.0.0/24]}}
- apiVersion: networking.k8s.io/v1
  kind: IPAddress
  metadata:
    name: 10.0.0.10
    labels: {ipaddress.kubernetes.io/ip-family: IPv4, ipaddress.kubernetes.io/managed-by: ipallocator.k8s.io}
  spec: {parentRef: {group: "", resource: services, namespace: default, name: web}}
`)
  const policy = join(dir, 'policy.yaml')
  await writeFile(policy, 'apiVersion: servicecidr-guard/v1alpha1\nkind: Policy\nspec: {}\n')
  const { code, stdout } = await run(['check', '--policy', policy, '--cluster', cluster, '--delete', 'twin-1', '--delete', 'twin-2'])
  t.equal(code, 1)
  t.match(stdout, /^ADMITTED DELETE ServiceCIDR "twin-1"[^]*\n\nDENIED DELETE ServiceCIDR "twin-2"[^]*Service default\/web \(10\.0\.0\.10\)/)
})

t.test('a protected name may not be deleted', async (t) => {
  const { code, stdout } = await run([...gke, '--delete', 'kubernetes', '-o', 'json'])
  t.equal(code, 1)
  const { decisions } = JSON.parse(stdout) as { decisions: { violations: { rule: string }[] }[] }
  t.strictSame(decisions.map((entry) => entry.violations.map((violation) => violation.rule)), [['ProtectedName', 'InUse']])
})

t.test('a manifest naming an existing ServiceCIDR is an UPDATE, as kubectl apply sends it', async (t) => {
  const dir = t.testdir()
  const same = join(dir, 'same.yaml')
  await writeFile(same, 'apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: extra-a}\nspec: {cidrs: [34.118.228.0/24]}\n')
  const unchanged = await run([...gke, same, '-o', 'json'])
  t.equal(unchanged.code, 0)
  t.strictSame(JSON.parse(unchanged.stdout), result([
    decision({ operation: 'UPDATE', name: 'extra-a', cidrs: ['34.118.228.0/24'], file: same, document: 1, bypass: 'MetadataOnly' }),
  ]))
  const moved = join(dir, 'moved.yaml')
  await writeFile(moved, 'apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: extra-a}\nspec: {cidrs: [34.118.229.0/24]}\n')
  const changed = await run([...gke, moved])
  t.equal(changed.code, 1)
  t.match(changed.stdout, 'DENIED UPDATE ServiceCIDR "extra-a" 34.118.229.0/24')
  t.match(changed.stdout, '  - ValidCIDR: spec.cidrs[0]: Invalid value: "34.118.229.0/24": field is immutable')
})

t.test('exemptions apply only with --as and --as-group', async (t) => {
  const dir = t.testdir()
  const policy = join(dir, 'policy.yaml')
  await writeFile(policy, 'apiVersion: servicecidr-guard/v1alpha1\nkind: Policy\nspec:\n  deniedRanges: [10.100.0.0/16]\n  exemptions: {usernames: [platform-admin], groups: ["platform:network-admins"]}\n')
  const neutral = await run(['check', '--policy', policy, fixture.manifest('list.yaml')])
  t.equal(neutral.code, 1)
  t.match(neutral.stdout, 'checked as servicecidr-guard:check')
  const asUser = await run(['check', '--policy', policy, '--as', 'platform-admin', fixture.manifest('list.yaml'), '-o', 'json'])
  t.equal(asUser.code, 0)
  const parsed = JSON.parse(asUser.stdout) as { user: unknown, decisions: { bypass: unknown }[] }
  t.strictSame(parsed.user, { username: 'platform-admin', groups: [] })
  t.strictSame(parsed.decisions.map((entry) => entry.bypass), ['Exempt', 'Exempt'])
  const asGroup = await run(['check', '--policy', policy, '--as', 'jo', '--as-group', 'dev', '--as-group', 'platform:network-admins', fixture.manifest('list.yaml')])
  t.equal(asGroup.code, 0)
  t.match(asGroup.stdout, /^EXEMPT CREATE ServiceCIDR "extra-e" 34\.118\.231\.0\/24 .*\n {2}exempt: the user or one of its groups is in spec\.exemptions\n/)
})

t.test('- reads a manifest from standard input', async (t) => {
  const stdin = 'apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata:\n  name: piped\nspec:\n  cidrs: [34.118.235.0/24]\n'
  const { code, stdout } = await run([...gke, '-', '-o', 'json'], { stdin })
  t.equal(code, 0)
  t.strictSame(JSON.parse(stdout), result([decision({ name: 'piped', cidrs: ['34.118.235.0/24'], file: '(stdin)', document: 1 })]))
  const broken = await run([...gke, '-'], { stdin: 'kind: [' })
  t.equal(broken.code, 2)
  t.match(broken.stderr, /^servicecidr-guard: \(stdin\), document 1: not valid YAML: /)
})

t.test('input errors exit 2 with a message naming the file, and no stack trace', async (t) => {
  const cases: [string, string[], RegExp][] = [
    ['missing manifest', [...gke, 'test/fixtures/manifests/nope.yaml'], /^servicecidr-guard: cannot read manifest test\/fixtures\/manifests\/nope\.yaml: no such file\n$/],
    ['missing policy', ['check', '--policy', 'nope.yaml', fixture.manifest('single.yaml')], /^servicecidr-guard: cannot read policy file nope\.yaml: no such file\n$/],
    ['missing cluster file', ['check', '--policy', fixture.gkePolicy, '--cluster', 'nope.yaml', fixture.manifest('single.yaml')], /^servicecidr-guard: cannot read cluster file nope\.yaml: no such file\n$/],
    ['a directory', [...gke, 'test/fixtures'], /^servicecidr-guard: cannot read manifest test\/fixtures: is a directory, not a file\n$/],
    ['bad policy', ['check', '--policy', fixture.invalidPolicy, fixture.manifest('single.yaml')],
      /^servicecidr-guard: invalid policy test\/fixtures\/policies\/invalid\.yaml:\n {2}- spec: unknown field "colour"\n {2}- spec\.overlap: must be one of "Deny", "AllowExpansion", "Allow"\n {2}- spec\.allowedRanges\[0\]: "34\.118\.224\.1\/20" is not a canonical CIDR \(must not have bits set beyond the prefix length\)\n$/],
    ['broken YAML', [...gke, fixture.manifest('broken.yaml')],
      /^servicecidr-guard: test\/fixtures\/manifests\/broken\.yaml, document 1: not valid YAML: deficient indentation at line 7, column 1\n$/],
    ['wrong kind', [...gke, fixture.manifest('wrong-kind.yaml')],
      /^servicecidr-guard: test\/fixtures\/manifests\/wrong-kind\.yaml, document 2: expected a ServiceCIDR or IPAddress of networking\.k8s\.io \(v1, v1beta1, v1alpha1\), or a List of them; found Service v1\n$/],
    ['an IPAddress in a manifest', ['check', '--policy', fixture.gkePolicy, fixture.gkeCluster],
      /^servicecidr-guard: test\/fixtures\/clusters\/gke\.yaml, document 1, items\[3\]: a manifest may hold only ServiceCIDRs; IPAddress "34\.118\.224\.1" belongs in a --cluster file\n$/],
    ['unparsable CIDR in the cluster', ['check', '--policy', fixture.gkePolicy, '--cluster', fixture.invalidCluster, fixture.manifest('single.yaml')],
      /^servicecidr-guard: test\/fixtures\/clusters\/invalid-cidr\.yaml, document 1, items\[1\]: ServiceCIDR "sloppy" has CIDR "34\.118\.228\.1\/24", which must not have bits set beyond the prefix length\n$/],
    ['unknown --delete', [...gke, '--delete', 'nope'], /^servicecidr-guard: --delete nope: there is no ServiceCIDR "nope" in the --cluster files or the admitted manifests\n$/],
    ['nothing to check', gke, /^servicecidr-guard: nothing to check: name manifest files \(or - for stdin\), or --delete NAME\n$/],
    ['unknown flag', [...gke, '--frobnicate', fixture.manifest('single.yaml')], /^error: unknown option '--frobnicate'\n\(run with --help for usage\)\n$/],
    ['no --policy', ['check', fixture.manifest('single.yaml')], /^error: required option '--policy <file>' not specified\n/],
    ['bad output format', [...gke, '-o', 'xml', fixture.manifest('single.yaml')], /^error: option '-o, --output <format>' argument 'xml' is invalid\. Allowed choices are text, json, junit\.\n/],
  ]
  for (const [name, args, stderr] of cases) {
    const result = await run(args)
    t.equal(result.code, 2, `${name}: exit 2`)
    t.match(result.stderr, stderr, `${name}: message`)
    t.notMatch(result.stderr, /\n\s+at /, `${name}: no stack trace`)
    t.equal(result.stdout, '', `${name}: nothing on stdout`)
  }
})

t.test('--help describes the command, the exemptions caveat and the exit codes', async (t) => {
  const { code, stdout } = await run(['check', '--help'])
  t.equal(code, 0)
  t.match(stdout, 'Usage: servicecidr-guard check [options] [manifest...]')
  t.match(stdout, 'spec.exemptions do not apply\nunless --as USER [--as-group GROUP]')
  t.match(stdout, 'Exit status: 0 all admitted, 1 any denied, 2 usage, policy or input error.')
})

t.test('an UPDATE may add the other family to a single-CIDR ServiceCIDR, and change nothing else', async (t) => {
  const dir = t.testdir()
  const policy = join(dir, 'open.yaml')
  await writeFile(policy, 'apiVersion: servicecidr-guard/v1alpha1\nkind: Policy\nspec: {}\n')
  const manifest = async (name: string, cidrs: string[]): Promise<string> => {
    const path = join(dir, name)
    await writeFile(path, JSON.stringify({ apiVersion: 'networking.k8s.io/v1', kind: 'ServiceCIDR', metadata: { name: 'extra-a' }, spec: { cidrs } }))
    return path
  }
  const cases: [string, string[], number, string][] = [
    ['dual-stack', ['34.118.228.0/24', 'fd00:1::/112'], 0, 'ADMITTED UPDATE ServiceCIDR "extra-a" 34.118.228.0/24, fd00:1::/112'],
    ['first CIDR changed', ['fd00:1::/112', '34.118.228.0/24'], 1, '  - ValidCIDR: spec.cidrs[0]: Invalid value: "fd00:1::/112": field is immutable'],
    ['same family twice', ['34.118.228.0/24', '34.118.229.0/24'], 1, '  - ValidCIDR: spec.cidrs: Invalid value: may specify no more than one IP for each IP family'],
    ['emptied', [], 1, '  - ValidCIDR: spec.cidrs: Invalid value: []: field is immutable'],
  ]
  for (const [name, cidrs, code, line] of cases) {
    const result = await run(['check', '--policy', policy, '--cluster', fixture.gkeCluster, await manifest(`${name}.json`, cidrs)])
    t.equal(result.code, code, name)
    t.match(result.stdout, line, name)
  }
})

t.test('manifests that hold no ServiceCIDR are an input error, as kubectl apply refuses files without objects', async (t) => {
  // A generator that failed upstream of a pipe must not pass a CI gate as "0 requests checked".
  const empty = await run([...gke, '-'], { stdin: '' })
  t.equal(empty.code, 2)
  t.equal(empty.stderr, 'servicecidr-guard: nothing to check: (stdin) holds no ServiceCIDR\n')
  const documents = await run([...gke, fixture.manifest('empty.yaml'), '-'], { stdin: '---\n---\n' })
  t.equal(documents.code, 2)
  t.equal(documents.stderr, 'servicecidr-guard: nothing to check: test/fixtures/manifests/empty.yaml, (stdin) hold no ServiceCIDR\n')
  const deleting = await run([...gke, '--delete', 'extra-a', '-'], { stdin: '' })
  t.not(deleting.code, 2, '--delete alone is something to check')
})

t.test('a ServiceCIDR whose name kube-apiserver would refuse is denied (ValidName), as kubectl apply would fail', async (t) => {
  const stdin = 'apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: Bad_Name}\nspec: {cidrs: [34.118.235.0/24]}\n'
  const { code, stdout } = await run([...gke, '-', '-o', 'json'], { stdin })
  t.equal(code, 1)
  const [reviewed] = (JSON.parse(stdout) as { decisions: { allowed: boolean, violations: { rule: string, field: string }[] }[] }).decisions
  t.equal(reviewed?.allowed, false)
  t.same(reviewed?.violations.map(({ rule, field }) => [rule, field]), [['ValidName', 'metadata.name']])
})
