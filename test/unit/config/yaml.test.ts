// The YAML reader (src/config/yaml.ts): a kubectl List is read one item at a time, and every file
// means exactly what js-yaml reads when it parses the file whole; errors carry their place in the file.

import { loadAll } from 'js-yaml'
import t from 'tap'
import { readYAMLDocuments, StreamedItems, YAMLSyntaxError } from '../../../src/config/yaml.ts'

/** The documents with streamed items made into arrays, as whole parsing gives them. */
function read(text: string): unknown[] {
  return [...readYAMLDocuments(text)].map(({ value }) => {
    if (typeof value !== 'object' || value === null || !('items' in value) || !(value.items instanceof StreamedItems)) return value
    return { ...value, items: [...value.items] }
  })
}

function streamed(text: string): boolean[] {
  return [...readYAMLDocuments(text)].map(({ value }) => typeof value === 'object' && value !== null && 'items' in value && value.items instanceof StreamedItems)
}

const kubectlList = `apiVersion: v1
items:
- apiVersion: networking.k8s.io/v1
  kind: ServiceCIDR
  metadata:
    name: kubernetes
    annotations:
      note: |
        - not an item
        kind: not a key
  spec:
    cidrs:
    - 10.96.0.0/28
# a comment at column 0 between items
- apiVersion: networking.k8s.io/v1
  kind: IPAddress
  metadata:
    labels: {ipaddress.kubernetes.io/ip-family: IPv4}
    name: 10.96.0.1
  spec:
    parentRef: {group: "", resource: services, namespace: default, name: "kubernetes"}
-
  apiVersion: v1
  kind: Pod
kind: List
metadata:
  resourceVersion: ""
`

t.test('a kubectl List is streamed, and reads as the whole parse reads it', (t) => {
  t.strictSame(streamed(kubectlList), [true], 'its items are StreamedItems')
  t.strictSame(read(kubectlList), loadAll(kubectlList), 'the same values as js-yaml parsing the whole file')
  const [document] = [...readYAMLDocuments(kubectlList)]
  t.equal((document?.value as { items: StreamedItems }).items.length, 3, 'three items')
  t.end()
})

t.test('every shape reads as the whole parse reads it', (t) => {
  const cases: [string, string, boolean[]][] = [
    ['multi-document, a List among them', `a: 1\n---\n${kubectlList}---\nb: [1, 2]\n`, [false, true, false]],
    ['an opening marker and empty documents', '---\na: 1\n---\n---\nb: 2\n', [false, false, false]],
    ['a trailing marker: an empty document', 'a: 1\n---\n', [false, false]],
    ['comments before the first marker are no document', '# c\n---\na: 1', [false]],
    ['an empty file', '', []],
    ['an anchor in one item, its alias in another: parsed whole from that item on', 'items:\n- a: &x 1\n- b: 2\n- c: *x\n', [true]],
    ['an indented sequence under items', 'apiVersion: v1\nitems:\n  - a: 1\n  - b: 2\nkind: List\n', [false]],
    ['items: [] inline', 'apiVersion: v1\nitems: []\nkind: List\n', [false]],
    ['another key\'s sequence at column 0 is not items', 'items:\n- a\nother:\n- b\nkind: List\n', [true]],
    ['a top-level sequence', '- a\n- b\n', [false]],
    ['CRLF line ends', 'apiVersion: v1\r\nitems:\r\n- a: 1\r\n- b: "x"\r\nkind: List\r\n', [true]],
    ['a flow mapping document', '{apiVersion: v1, items: [{a: 1}]}\n', [false]],
    ['a directive: the file is parsed whole', '%YAML 1.2\n---\nitems:\n- a\n', [false]],
    ['a document end marker: the file is parsed whole', 'a: 1\n...\n---\nb: 2\n', [false, false]],
    ['a marker with content', '--- {a: 1}\n---\nb: 2\n', [false, false]],
    ['a quoted multi-line scalar in an item', 'items:\n- a: "one\n    two"\n- b: 2\n', [true]],
  ]
  for (const [name, text, isStreamed] of cases) {
    t.strictSame(read(text), loadAll(text), name)
    t.strictSame(streamed(text), isStreamed, `${name}: ${isStreamed.includes(true) ? 'streamed' : 'parsed whole'}`)
  }
  t.end()
})

t.test('a long List is read in batches; a batch that cannot stand alone is read from the whole document', (t) => {
  const items = Array.from({ length: 450 }, (_, index) => `- name: item-${String(index)}\n  value: ${index === 10 ? '&shared 7' : index === 300 ? '*shared' : String(index)}\n`)
  const text = `apiVersion: v1\nitems:\n${items.join('')}kind: List\n`
  t.strictSame(streamed(text), [true])
  const whole = loadAll(text)
  t.strictSame(read(text), whole, 'the alias in the second batch resolves, every item once, in order')
  t.equal((whole[0] as { items: { value: number }[] }).items[300]?.value, 7)
  const broken = text.replace('- name: item-420\n', '- name: [item-420\n')
  t.equal(failure(broken).message, 'deficient indentation at line 844, column 3', 'an error in the third batch (item 420, line 843) names its line in the file')
  t.end()
})

function failure(text: string): { message: string, document: number | undefined } {
  try {
    read(text)
  } catch (error) {
    if (error instanceof YAMLSyntaxError) return { message: error.message, document: error.document }
    throw error
  }
  throw new Error('expected a YAMLSyntaxError')
}

t.test('syntax errors name their line in the whole file, and their document', (t) => {
  const cases: [string, string, { message: string, document: number | undefined }][] = [
    ['in an item of a streamed List', 'apiVersion: v1\nitems:\n- a: 1\n- c: [2\nkind: List\n', { message: 'deficient indentation at line 5, column 1', document: 1 }],
    ['a duplicate key in an item of the second document', 'a: 1\n---\napiVersion: v1\nitems:\n- a: 1\n- c: 2\n  c: 3\nkind: List\n', { message: 'duplicated mapping key at line 7, column 3', document: 2 }],
    ['a duplicate key in the head of a List, after its items', 'kind: List\nitems:\n- a: 1\n- b: 2\nkind: List\n', { message: 'duplicated mapping key at line 5, column 1', document: 1 }],
    ['a duplicate key in a plain document', 'a: 1\n---\nb: 2\nb: 3\n', { message: 'duplicated mapping key at line 4, column 1', document: 2 }],
    ['in a file parsed whole', '%YAML 1.2\n---\na: 1\n---\nb: 2\nb: 3\n', { message: 'duplicated mapping key at line 6, column 1', document: 2 }],
    ['an alias to nothing', 'items:\n- a: *nowhere\n', { message: 'unidentified alias "nowhere" at line 2, column 7', document: 1 }],
  ]
  for (const [name, text, want] of cases) t.strictSame(failure(text), want, name)
  t.end()
})
