// `plan` in-process: size to prefix length, exact prefix lengths, the private-range fallback, every
// way to find nothing (exit 1), usage errors (exit 2), and that check admits what plan proposes.

import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import t from 'tap'
import { fixture, run } from '../../helpers/cli.ts'

const gke = ['plan', '--policy', fixture.gkePolicy, '--cluster', fixture.gkeCluster]

const planJSON = (fields: Record<string, unknown>): Record<string, unknown> => ({
  apiVersion: 'servicecidr-guard/v1alpha1',
  kind: 'PlanResult',
  family: 'IPv4',
  searched: { from: 'allowedRanges', ranges: ['34.118.224.0/20'] },
  reason: null,
  ...fields,
})

t.test('--size N: the longest prefix holding N, first free in allowedRanges', async (t) => {
  const { code, stdout, stderr } = await run([...gke, '--size', '200'])
  t.equal(code, 0)
  t.equal(stderr, '')
  // kubernetes takes 34.118.224.0/22 and extra-a 34.118.228.0/24: the first free /24 follows them.
  t.equal(stdout, '34.118.229.0/24: 254 usable Service addresses (IPv4)\nsearched spec.allowedRanges: 34.118.224.0/20\n')
  const json = await run([...gke, '--size', '1000', '-o', 'json'])
  t.equal(json.code, 0)
  // A /22 holds 1022; 34.118.228.0/22 holds extra-a, and 34.118.236.0/24 (extra-free) is past it.
  t.strictSame(JSON.parse(json.stdout), planJSON({ request: { size: '1000' }, prefixLength: 22, cidr: '34.118.232.0/22', usable: '1022' }))
})

t.test('--size counts usable addresses: 254 fits a /24, 255 needs a /23', async (t) => {
  const fits = await run([...gke, '--size', '254', '-o', 'json'])
  t.equal((JSON.parse(fits.stdout) as { prefixLength: number }).prefixLength, 24)
  const over = await run([...gke, '--size', '255', '-o', 'json'])
  t.strictSame(JSON.parse(over.stdout), planJSON({ request: { size: '255' }, prefixLength: 23, cidr: '34.118.230.0/23', usable: '510' }))
})

t.test('a small size is widened to the policy\'s longest allowed prefix', async (t) => {
  const { code, stdout } = await run([...gke, '--size', '3', '-o', 'json'])
  t.equal(code, 0)
  t.strictSame(JSON.parse(stdout), planJSON({ request: { size: '3' }, prefixLength: 28, cidr: '34.118.229.0/28', usable: '14' }))
})

t.test('--prefix-length L asks for exactly that length', async (t) => {
  const { code, stdout } = await run([...gke, '--prefix-length', '23', '-o', 'json'])
  t.equal(code, 0)
  t.strictSame(JSON.parse(stdout), planJSON({ request: { prefixLength: 23 }, prefixLength: 23, cidr: '34.118.230.0/23', usable: '510' }))
})

t.test('nothing fits: exit 1 with the reason', async (t) => {
  const cases: [string, string[], string][] = [
    ['too many addresses for the bounds', ['--size', '5000'], 'no free IPv4 range fits: no IPv4 prefix (the policy allows /20 to /28) holds 5000 Service addresses'],
    ['no free block left', ['--prefix-length', '20'], 'no free IPv4 range fits: no /20 is left in 34.118.224.0/20 outside the denied ranges and the existing ServiceCIDRs'],
    ['outside the bounds', ['--prefix-length', '29'], 'no free IPv4 range fits: /29 is outside the policy\'s IPv4 bounds, /20 to /28'],
  ]
  for (const [name, args, first] of cases) {
    const { code, stdout } = await run([...gke, ...args])
    t.equal(code, 1, name)
    t.equal(stdout, `${first}\nsearched spec.allowedRanges: 34.118.224.0/20\n`, name)
  }
  const v6 = await run([...gke, '--family', 'ipv6', '--size', '10', '-o', 'json'])
  t.equal(v6.code, 1)
  t.strictSame(JSON.parse(v6.stdout), planJSON({
    family: 'IPv6',
    request: { size: '10' },
    searched: { from: 'allowedRanges', ranges: [] },
    prefixLength: 124,
    cidr: null,
    usable: null,
    reason: 'the policy\'s allowedRanges hold no IPv6 range',
  }))
})

t.test('without allowedRanges the private ranges are searched, and the output says so', async (t) => {
  const { code, stdout } = await run(['plan', '--policy', fixture.genericPolicy, '--size', '70000'])
  t.equal(code, 0)
  // 10.0.0.0/14 is denied (pods), so the first free /15 is 10.4.0.0/15.
  t.equal(stdout, '10.4.0.0/15: 131070 usable Service addresses (IPv4)\n' +
    'the policy sets no allowedRanges, so the private ranges were searched: 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16\n')
  const v6 = await run(['plan', '--policy', fixture.genericPolicy, '--family', 'ipv6', '--size', '70000', '-o', 'json'])
  t.equal(v6.code, 0)
  t.strictSame(JSON.parse(v6.stdout), planJSON({
    family: 'IPv6',
    request: { size: '70000' },
    searched: { from: 'privateRanges', ranges: ['fd00::/8'] },
    prefixLength: 111,
    cidr: 'fd00::/111',
    usable: '131071',
  }))
})

t.test('IPv6 prefixes shorter than /64 are refused, as the allocator refuses them', async (t) => {
  const dir = t.testdir()
  const policy = join(dir, 'open.yaml')
  await writeFile(policy, 'apiVersion: servicecidr-guard/v1alpha1\nkind: Policy\nspec: {}\n')
  const { code, stdout } = await run(['plan', '--policy', policy, '--family', 'ipv6', '--prefix-length', '48'])
  t.equal(code, 1)
  t.match(stdout, /^no free IPv6 range fits: the allocator refuses IPv6 ServiceCIDRs shorter than \/64\n/)
  const ok = await run(['plan', '--policy', policy, '--family', 'ipv6', '--prefix-length', '64'])
  t.equal(ok.code, 0)
  t.match(ok.stdout, /^fd00::\/64: 18446744073709551615 usable Service addresses \(IPv6\)\n/)
})

t.test('what plan proposes, check admits', async (t) => {
  for (const size of ['1', '14', '200', '1000']) {
    const planned = await run([...gke, '--size', size, '-o', 'json'])
    const { cidr } = JSON.parse(planned.stdout) as { cidr: string }
    const stdin = JSON.stringify({ apiVersion: 'networking.k8s.io/v1', kind: 'ServiceCIDR', metadata: { name: 'planned' }, spec: { cidrs: [cidr] } })
    const checked = await run(['check', '--policy', fixture.gkePolicy, '--cluster', fixture.gkeCluster, '-'], { stdin })
    t.equal(checked.code, 0, `--size ${size}: ${cidr} is admitted`)
  }
})

t.test('usage errors exit 2', async (t) => {
  const cases: [string, string[], RegExp][] = [
    ['neither size nor length', gke, /^servicecidr-guard: say how large a range: --size N \(Service addresses\) or --prefix-length L\n$/],
    ['both', [...gke, '--size', '10', '--prefix-length', '24'], /^error: option '--size <n>' cannot be used with option '--prefix-length <l>'\n/],
    ['size 0', [...gke, '--size', '0'], /^error: option '--size <n>' argument '0' is invalid\. must be a whole number of addresses, 1 or more\n/],
    ['size not a number', [...gke, '--size', 'lots'], /^error: option '--size <n>' argument 'lots' is invalid\./],
    ['length too long for IPv4', [...gke, '--prefix-length', '33'], /^servicecidr-guard: --prefix-length 33 is longer than an IPv4 address \(\/32\)\n$/],
    ['length not a number', [...gke, '--prefix-length', '/24'], /^error: option '--prefix-length <l>' argument '\/24' is invalid\./],
    ['unknown family', [...gke, '--size', '1', '--family', 'ipv5'], /^error: option '--family <family>' argument 'ipv5' is invalid\. Allowed choices are ipv4, ipv6\.\n/],
    ['missing cluster file', ['plan', '--policy', fixture.gkePolicy, '--cluster', 'nope.yaml', '--size', '1'], /^servicecidr-guard: cannot read cluster file nope\.yaml: no such file\n$/],
    ['bad policy', ['plan', '--policy', fixture.invalidPolicy, '--size', '1'], /^servicecidr-guard: invalid policy test\/fixtures\/policies\/invalid\.yaml:\n/],
    ['unknown flag', [...gke, '--size', '1', '--wide'], /^error: unknown option '--wide'\n/],
  ]
  for (const [name, args, stderr] of cases) {
    const result = await run(args)
    t.equal(result.code, 2, `${name}: exit 2`)
    t.match(result.stderr, stderr, `${name}: message`)
    t.equal(result.stdout, '', `${name}: nothing on stdout`)
  }
})

t.test('plan --help', async (t) => {
  const { code, stdout } = await run(['plan', '--help'])
  t.equal(code, 0)
  t.match(stdout, 'Usage: servicecidr-guard plan [options]')
  t.match(stdout, 'the private ranges (10.0.0.0/8, 172.16.0.0/12,\n192.168.0.0/16, fd00::/8) are searched')
})
