// Prints, as one JSON List, the objects of the given kinds in a multi-document YAML file (rendered
// manifests): what hack/local/up.sh and hack/images/verify.sh apply to a cluster that has no CRDs.
//
//   node hack/manifests/objects.ts FILE KIND [KIND ...]

import { loadAll } from 'js-yaml'
import { readFileSync } from 'node:fs'

const [file, ...kinds] = process.argv.slice(2)
if (file === undefined || kinds.length === 0) {
  console.error('usage: objects.ts FILE KIND [KIND ...]')
  process.exit(2)
}
const wanted = new Set(kinds)
const items = loadAll(readFileSync(file, 'utf8')).filter((object) =>
  typeof object === 'object' && object !== null && 'kind' in object && wanted.has(String(object.kind)))
process.stdout.write(JSON.stringify({ apiVersion: 'v1', kind: 'List', items }))
