// The JSON reader (src/json/reader.ts) against JSON.parse: the same documents refused, the
// same values read. Generated documents (fast-check; see test/support/fuzz.ts for replaying a
// seed), then the cases that once went wrong or easily could, by name.

import t from 'tap'
import fc from 'fast-check'
import { isDeepStrictEqual } from 'node:util'
import { JSONSyntaxError, Mismatch, boolean, knownString, object, objects, readDocument, readJSON, string, strings, withoutMismatches, type JSONType, type Shape, type Value } from '../../../src/json/reader.ts'
import { fuzzParameters } from '../../support/fuzz.ts'

const shape = object({
  name: string,
  kind: knownString('Service', 'ServiceCIDR', ''),
  flag: boolean,
  list: strings(3),
  nested: object({ name: string, list: strings(2), deeper: object({ flag: boolean }) }, { nullable: true }),
  items: objects(object({ name: string, flag: boolean })),
})

const jsonType = (value: unknown): JSONType =>
  value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value === 'object' ? 'object' : typeof value as JSONType

/** What the reader should return, computed from JSON.parse's value. */
function project(value: unknown, wanted: Shape): Value {
  switch (wanted.type) {
    case 'string': return typeof value === 'string' ? value : new Mismatch('string', jsonType(value))
    case 'boolean': return typeof value === 'boolean' ? value : new Mismatch('boolean', jsonType(value))
    case 'strings': {
      if (!Array.isArray(value)) return new Mismatch('strings', jsonType(value))
      const index = value.findIndex((item) => typeof item !== 'string')
      if (index >= 0) return new Mismatch('strings', 'array', index)
      if (value.length > wanted.maxItems) return new Mismatch('strings', 'array', -1, true)
      return value as string[]
    }
    case 'objects': {
      if (!Array.isArray(value)) return new Mismatch('objects', jsonType(value))
      const index = value.findIndex((item) => jsonType(item) !== 'object')
      if (index >= 0) return new Mismatch('objects', 'array', index)
      return value.map((item) => project(item, wanted.item) as Record<string, Value>)
    }
    case 'object': {
      if (value === null && wanted.nullable) return null
      if (typeof value !== 'object' || value === null || Array.isArray(value)) return new Mismatch('object', jsonType(value))
      const result: Record<string, Value> = {}
      for (const field of wanted.fields) {
        if (Object.hasOwn(value, field.name)) result[field.name] = project((value as Record<string, unknown>)[field.name], field.shape)
      }
      return result
    }
  }
}

/** Refused as JSON, by either reading. */
const syntax = Symbol('syntax error')

/** The Mismatches a value holds, at any depth. */
function mismatchesIn(value: Value | undefined): number {
  if (value instanceof Mismatch) return 1
  if (typeof value !== 'object' || value === null) return 0
  return (Array.isArray(value) ? value as readonly Value[] : Object.values(value as Record<string, Value>)).reduce((sum: number, item) => sum + mismatchesIn(item), 0)
}

/**
 * Both readings of `bytes`: a JSONSyntaxError (or JSON.parse's SyntaxError) becomes `syntax`. The
 * reader's count of its Mismatches is checked on the way: never fewer than the value holds (a
 * caller skips looking for them at 0).
 */
function both(bytes: Buffer): { reader: Value | typeof syntax, parse: Value | typeof syntax } {
  let reader: Value | typeof syntax
  try {
    const read = readDocument(bytes, shape)
    if (mismatchesIn(read.value) > read.mismatches) throw new Error(`${String(mismatchesIn(read.value))} Mismatches read, ${String(read.mismatches)} counted: ${bytes.toString()}`)
    reader = read.value
  } catch (error) {
    if (!(error instanceof JSONSyntaxError)) throw error
    reader = syntax
  }
  let parse: Value | typeof syntax
  try {
    parse = project(JSON.parse(bytes.toString('utf8')), shape)
  } catch {
    parse = syntax
  }
  return { reader, parse }
}

const agrees = (bytes: Buffer): boolean => {
  const { reader, parse } = both(bytes)
  return isDeepStrictEqual(reader, parse)
}

// Documents that reach the shaped fields: the field names (and near misses) as keys, any JSON as
// values, nested a few levels.
const key = fc.oneof(fc.constantFrom('name', 'kind', 'flag', 'list', 'nested', 'deeper', 'items', 'Name', 'nam', '__proto__', 'constructor', ''), fc.string({ maxLength: 6 }))
// A knownString's values, and texts that nearly are.
const kindValue = fc.constantFrom('Service', 'ServiceCIDR', '', 'Servic', 'ServiceCIDRs', 'service', 'Sérvice')
const { document } = fc.letrec<{ document: Record<string, unknown>, value: unknown }>((tie) => ({
  document: fc.dictionary(key, tie('value'), { maxKeys: 6 }),
  value: fc.oneof({ depthSize: 'small' },
    fc.jsonValue({ maxDepth: 2 }),
    kindValue,
    fc.array(fc.string({ maxLength: 4 }), { maxLength: 4 }),
    fc.array(tie('document'), { maxLength: 3 }),
    fc.boolean(),
    tie('document')),
}))

/** JSON text with the quirks JSON.stringify never writes: whitespace, escaped keys, duplicate keys. */
const quirky = fc.tuple(document, fc.constantFrom(0, 1, 2, 3, 4), fc.nat()).map(([value, quirk, where]) => {
  const text = JSON.stringify(value)
  switch (quirk) {
    case 1: return JSON.stringify(value, null, '\t').replace(/\n/g, '\r\n')
    case 2: return text.replace(/"(name|kind|flag|list|nested)":/g, (_, name: string) => `"\\u${name.charCodeAt(0).toString(16).padStart(4, '0')}${name.slice(1)}":`).replace(/"Service/g, '"\\u0053ervice')
    case 3: return text.length > 2 ? `{"name":"first","flag":1,${text.slice(1)}` : text
    case 4: return `${text.slice(0, where % (text.length + 1))} ${text.slice(where % (text.length + 1))}`
    default: return text
  }
})

/** Valid text broken in one place: cut short, or a byte inserted, replaced or removed. */
const broken = fc.tuple(quirky, fc.nat(), fc.constantFrom(...Array.from('{}[]":,\\ 0-+.eEtfnu\u0000\u001f\u00a0\ufeffx'))).chain(([text, at, char]) => {
  const i = at % (text.length + 1)
  return fc.constantFrom(text.slice(0, i), text.slice(0, i) + char + text.slice(i), text.slice(0, i) + char + text.slice(i + 1), text.slice(0, i) + text.slice(i + 1))
})

t.test('generated documents: the reader refuses what JSON.parse refuses and reads what it reads', (t) => {
  let runs = 0
  for (const [name, texts] of [['quirky', quirky], ['broken', broken]] as const) {
    fc.assert(fc.property(texts, (text) => {
      runs++
      return agrees(Buffer.from(text))
    }), fuzzParameters(4000))
    t.pass(`${name}: 4000 documents agree`)
  }
  fc.assert(fc.property(fc.uint8Array({ maxLength: 64 }), fc.constantFrom('{"name":"', '{"list":["', '{"nested":{"name":"'), (bytes, prefix) => {
    runs++
    // Arbitrary bytes, invalid UTF-8 included, inside a string that is read and as a whole document.
    return agrees(Buffer.concat([Buffer.from(prefix), bytes, Buffer.from(prefix.endsWith('["') ? '"]}' : prefix.startsWith('{"nested') ? '"}}' : '"}')])) && agrees(Buffer.from(bytes))
  }), fuzzParameters(2000))
  t.equal(runs, 10_000, `${runs} documents compared with JSON.parse`)
  t.end()
})

t.test('named cases: numbers, literals, strings, structure', (t) => {
  const cases: [string, string][] = [
    ['empty document', ''],
    ['only whitespace', ' \t\r\n'],
    ['a byte-order mark', '\ufeff{}'],
    ['no-break space is not whitespace', '{\u00a0}'],
    ['trailing comma in an object', '{"name":"x",}'],
    ['trailing comma in a read list', '{"list":["a",]}'],
    ['trailing comma in a skipped list', '{"other":[1,]}'],
    ['leading zero', '{"other":01}'],
    ['negative zero', '{"other":-0}'],
    ['a lone minus', '{"other":-}'],
    ['a fraction without digits', '{"other":1.}'],
    ['a fraction without an integer part', '{"other":.5}'],
    ['an exponent without digits', '{"other":1e}'],
    ['an exponent with a sign', '{"other":1E+5}'],
    ['a plus sign', '{"other":+1}'],
    ['a cut literal', '{"flag":tru}'],
    ['a literal in capitals', '{"flag":True}'],
    ['a raw control character in a skipped string', '{"other":"a\u0001b"}'],
    ['a raw control character in a read string', '{"name":"a\u001fb"}'],
    ['an unknown escape', '{"name":"\\x41"}'],
    ['a short unicode escape', '{"name":"\\u12"}'],
    ['a lone surrogate escape', '{"name":"\\ud800"}'],
    ['a surrogate pair escape', '{"name":"\\ud83d\\ude00"}'],
    ['escapes in a read key', '{"\\u006eame":"by escape","name":"plain"}'],
    ['a known value', '{"kind":"ServiceCIDR"}'],
    ['a known value by escape', '{"kind":"Servic\\u0065"}'],
    ['a known value cut short, and one longer', '{"kind":"Servic","name":"ServiceCIDRs"}'],
    ['a known value, then not', '{"kind":"Service","kind":"Servicf"}'],
    ['a known empty value', '{"kind":""}'],
    ['a duplicate key: the last wins', '{"name":"first","name":"second"}'],
    ['a duplicate key of another type', '{"flag":true,"flag":"yes"}'],
    ['a key that is not a string', '{name:"x"}'],
    ['a missing colon', '{"name" "x"}'],
    ['two documents', '{} {}'],
    ['a top-level array', '[{"name":"x"}]'],
    ['a top-level string', '"name"'],
    ['null where an object may be null', '{"nested":null}'],
    ['null where an object may not be', '{"nested":{"deeper":null}}'],
    ['too many items', '{"list":["a","b","c","d"]}'],
    ['a non-string item and too many', '{"list":["a",1,"c","d"]}'],
    ['deep nesting in a skipped field', `{"other":${'['.repeat(100_000)}${']'.repeat(100_000)}}`],
    ['deep nesting cut short', `{"other":${'['.repeat(1000)}${']'.repeat(999)}}`],
    ['__proto__ as a key', '{"__proto__":{"name":"x"},"name":"y"}'],
    ['a list of objects', '{"items":[{"name":"a","other":[1,2]},{"flag":false}]}'],
    ['a list with something else in it', '{"items":[{"name":"a"},"b",{}]}'],
    ['an empty list of objects', '{"items":[]}'],
  ]
  for (const [name, text] of cases) {
    const { reader, parse } = both(Buffer.from(text))
    t.same(reader, parse, name)
  }
  // Small ASCII documents are read from one decoded text (src/json/reader.ts, wholeTextBytes); the
  // others, string by string from the bytes. Both readings, on either side of the size.
  const padded = (filler: string, size: number): string => {
    const head = `{"name":"\\u00e9t\\u00e9 ${filler}","list":["a","${filler}"],"other":"`
    return `${head}${'x'.repeat(size - Buffer.byteLength(head) - 2)}"}`
  }
  for (const size of [16 * 1024, 16 * 1024 + 1]) {
    for (const [name, filler] of [['ASCII', 'plain'], ['not ASCII', 'été']] as const) {
      const text = padded(filler, size)
      const { reader, parse } = both(Buffer.from(text))
      t.same(reader, parse, `${name}, ${Buffer.byteLength(text)} bytes`)
      t.not(reader, syntax, `${name}, ${Buffer.byteLength(text)} bytes: read`)
    }
  }
  const invalidUTF8 = Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xff, 0xe2, 0x28, 0xa1, 0xc0]), Buffer.from('"}')])
  t.same(both(invalidUTF8).reader, both(invalidUTF8).parse, 'invalid UTF-8 in a read string becomes U+FFFD, as Buffer#toString decodes it')
  t.end()
})

t.test('withoutMismatches leaves out what was of another type', (t) => {
  const read = readJSON(Buffer.from('{"name":1,"flag":true,"nested":{"name":"n","list":"l"},"items":[{"name":"a","flag":"no"}]}'), shape)
  t.same(withoutMismatches(read), { flag: true, nested: { name: 'n' }, items: [{ name: 'a' }] })
  t.end()
})

t.test('a syntax error names its byte', (t) => {
  t.throws(() => readJSON(Buffer.from('{"name": ]'), shape), new JSONSyntaxError('unexpected "]"', 9))
  t.throws(() => readJSON(Buffer.from('{"name": "x"'), shape), new JSONSyntaxError('unexpected end of JSON', 12))
  t.end()
})
