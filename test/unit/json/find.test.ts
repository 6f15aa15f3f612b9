// stringAt: one string member of a JSON document, found without parsing the rest. A table of the
// documents it must read and must not be fooled by, then JSON.parse as the oracle on generated
// documents.

import fc from 'fast-check'
import t from 'tap'
import { stringAt } from '../../../src/json/find.ts'
import { fuzzParameters } from '../../support/fuzz.ts'

const path = ['metadata', 'resourceVersion']

t.test('reads the member at the path, and nothing that only looks like it', (t) => {
  const cases: { name: string, text: string, expected: string | undefined }[] = [
    { name: 'as kube-apiserver writes a Lease', text: '{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"name":"l","namespace":"n","uid":"u","resourceVersion":"4711","annotations":{"a":"[{\\"name\\":\\"x\\"}]"}},"spec":{}}', expected: '4711' },
    { name: 'after the annotations, with whitespace', text: ' {\n "metadata" : {\n  "annotations": {"resourceVersion": "1"},\n  "resourceVersion" : "2"\n }\n}\n', expected: '2' },
    { name: 'the key inside a string value', text: '{"a":"\\"metadata\\":{\\"resourceVersion\\":\\"9\\"}","metadata":{"resourceVersion":"7"}}', expected: '7' },
    { name: 'a value ending in escaped backslashes', text: '{"a":"x\\\\","metadata":{"resourceVersion":"7"}}', expected: '7' },
    { name: 'an escaped quote after backslashes', text: '{"a":"x\\\\\\"metadata\\":{","metadata":{"resourceVersion":"7"}}', expected: '7' },
    { name: 'deeper down, under another key', text: '{"spec":{"metadata":{"resourceVersion":"9"}},"metadata":{"ownerReferences":[{"resourceVersion":"8"}],"resourceVersion":"7"}}', expected: '7' },
    { name: 'in an array of objects only', text: '{"items":[{"metadata":{"resourceVersion":"9"}}]}', expected: undefined },
    { name: 'a top-level array', text: '[{"metadata":{"resourceVersion":"9"}}]', expected: undefined },
    { name: 'metadata without it', text: '{"metadata":{"name":"l"},"resourceVersion":"9"}', expected: undefined },
    { name: 'metadata not an object', text: '{"metadata":"resourceVersion","x":{"resourceVersion":"9"}}', expected: undefined },
    { name: 'a number, not a string', text: '{"metadata":{"resourceVersion":7}}', expected: undefined },
    { name: 'escapes in the value are decoded', text: '{"metadata":{"resourceVersion":"\\u0037\\"1"}}', expected: '7"1' },
    { name: 'escapes JSON does not have', text: '{"metadata":{"resourceVersion":"\\x37"}}', expected: undefined },
    { name: 'a key written with escapes (left to the caller, who parses it all)', text: '{"metadata":{"resource\\u0056ersion":"7"}}', expected: undefined },
    { name: 'a string that never ends', text: '{"metadata":{"resourceVersion":"7', expected: undefined },
    { name: 'a key that never ends', text: '{"metadata":{"resou', expected: undefined },
    { name: 'empty', text: '', expected: undefined },
    { name: 'the empty string', text: '{"metadata":{"resourceVersion":""}}', expected: '' },
  ]
  for (const { name, text, expected } of cases) t.equal(stringAt(text, path), expected, name)
  t.equal(stringAt('{"metadata":{"resourceVersion":"7"}}', []), undefined, 'an empty path')
  t.equal(stringAt('{"name":"n"}', ['name']), 'n', 'a path of one key')
  t.end()
})

/** What JSON.parse makes of the document at the path: the oracle. */
function parsedAt(text: string): string | undefined {
  const document: unknown = JSON.parse(text)
  if (typeof document !== 'object' || document === null || Array.isArray(document) || !('metadata' in document)) return undefined
  const { metadata } = document
  if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata) || !('resourceVersion' in metadata)) return undefined
  return typeof metadata.resourceVersion === 'string' ? metadata.resourceVersion : undefined
}

// Documents where the path's keys turn up everywhere: as keys at other depths, inside string values,
// with quotes and backslashes around them, in arrays. JSON.stringify writes each key once, so of
// duplicate keys (where the two differ by design) there are none.
const tricky = fc.constantFrom('metadata', 'resourceVersion', '"metadata":{', '"resourceVersion":"', '\\', '\\"', '{', '}', '[', ']', ':', '"')
const key = fc.oneof(tricky, fc.string({ maxLength: 6 }))
const leaf = fc.oneof(fc.string({ maxLength: 8 }), tricky.map((text) => `${text}x${text}`), fc.integer(), fc.boolean(), fc.constant(null))
const { tree } = fc.letrec<{ tree: unknown }>((tie) => ({
  tree: fc.oneof({ depthSize: 'small', withCrossShrink: true }, leaf, fc.array(tie('tree'), { maxLength: 3 }), fc.dictionary(key, tie('tree'), { maxKeys: 4 })),
}))
const metadata = fc.oneof({ arbitrary: tree, weight: 1 }, { arbitrary: fc.record({ resourceVersion: fc.oneof(fc.string({ maxLength: 8 }), tree) }, { requiredKeys: [] }).chain((base) =>
  fc.dictionary(key, tree, { maxKeys: 3 }).map((rest) => ({ ...rest, ...base }))), weight: 3 })
const document = fc.oneof({ arbitrary: tree, weight: 1 }, { arbitrary: fc.tuple(fc.dictionary(key, tree, { maxKeys: 3 }), metadata, fc.dictionary(key, tree, { maxKeys: 3 }))
  .map(([before, meta, after]) => ({ ...before, metadata: meta, ...after })), weight: 3 })

t.test('agrees with JSON.parse on generated documents, compact and indented', (t) => {
  let found = 0
  fc.assert(fc.property(document, fc.constantFrom(undefined, 1, '\t'), (value, indent) => {
    const text = JSON.stringify(value, null, indent)
    const expected = parsedAt(text)
    if (expected !== undefined) found++
    return stringAt(text, path) === expected
  }), fuzzParameters(4000))
  t.ok(found > 800, `${String(found)} of 4,000 documents held a resourceVersion`)
  t.end()
})
