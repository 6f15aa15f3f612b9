// A validating JSON reader that builds only the values it is asked for. JSON.parse builds every
// value of a document, and a document can ask for a lot: 6 MiB of `[{},{},…]` is about 130 MiB
// of heap and over a second of blocked event loop (docs/benchmarks.md, "Hostile input"). This
// reader checks the whole document against the JSON grammar (RFC 8259), so it refuses exactly what
// JSON.parse refuses, but materialises only the fields a Shape names; everything else is skipped
// byte by byte, in time linear in its length and memory independent of it (but for one copy of a
// small document as text: see wholeTextBytes). No I/O.
//
// Strings are decoded from UTF-8 as Buffer#toString does it for JSON.parse (invalid sequences
// become U+FFFD); the bytes the grammar cares about are ASCII, which no UTF-8 sequence contains, so
// scanning bytes and parsing decoded text agree. Duplicate keys: the last one wins, as in JSON.parse.

import { isAscii } from 'node:buffer'

export type Shape = StringShape | BooleanShape | StringsShape | ObjectShape | ObjectsShape

interface StringShape {
  readonly type: 'string'
  /** Values read as these one constant strings when the bytes match, not built for each document. */
  readonly known: readonly { readonly text: string, readonly bytes: Buffer }[]
}
interface BooleanShape { readonly type: 'boolean' }
/** An array of strings, of at most `maxItems`: the one kind of list the webhook reads. */
interface StringsShape { readonly type: 'strings', readonly maxItems: number }
interface ObjectShape {
  readonly type: 'object'
  readonly fields: readonly { readonly name: string, readonly bytes: Buffer, readonly shape: Shape }[]
  readonly nullable: boolean
}
/** An array of objects of one shape: the items of a Kubernetes list. */
interface ObjectsShape { readonly type: 'objects', readonly item: ObjectShape }

export const string: Shape = { type: 'string', known: [] }
/**
 * A string that is usually one of `values`: a match is the constant itself, so the fields of a
 * review that hold the same few values every time (its apiVersion, its operation) make no garbage.
 */
export const knownString = (...values: string[]): Shape => ({ type: 'string', known: values.map((text) => ({ text, bytes: Buffer.from(text) })) })
export const boolean: Shape = { type: 'boolean' }
export const strings = (maxItems: number): Shape => ({ type: 'strings', maxItems })
export const object = (fields: Readonly<Record<string, Shape>>, options: { nullable?: boolean } = {}): ObjectShape => ({
  type: 'object',
  fields: Object.entries(fields).map(([name, shape]) => ({ name, bytes: Buffer.from(name), shape })),
  nullable: options.nullable ?? false,
})
export const objects = (item: ObjectShape): Shape => ({ type: 'objects', item })

export type JSONType = 'null' | 'boolean' | 'number' | 'string' | 'array' | 'object'

/** Found where a Shape asked for something else; the value was checked, skipped and not built. */
export class Mismatch {
  readonly expected: Shape['type']
  readonly found: JSONType
  /** For `strings` and `objects`: the first item of another type, or -1. */
  readonly index: number
  /** For `strings`: set when the array has more items than allowed. */
  readonly tooMany: boolean

  constructor(expected: Shape['type'], found: JSONType, index = -1, tooMany = false) {
    this.expected = expected
    this.found = found
    this.index = index
    this.tooMany = tooMany
  }
}

/** What a Shape reads to: the values named, Mismatch where the document holds something else. */
export type Value = string | boolean | null | readonly string[] | readonly ReadObject[] | Mismatch | ReadObject
export interface ReadObject { readonly [field: string]: Value | undefined }

/** The values read, with every Mismatch left out: for readers that take a field of the wrong type as absent. */
export function withoutMismatches(value: Value): unknown {
  if (value instanceof Mismatch) return undefined
  if (Array.isArray(value)) return value.map((item: Value) => withoutMismatches(item))
  if (typeof value !== 'object' || value === null) return value
  const result: Record<string, unknown> = {}
  for (const [field, item] of Object.entries(value as ReadObject)) {
    if (item !== undefined && !(item instanceof Mismatch)) result[field] = withoutMismatches(item)
  }
  return result
}

export class JSONSyntaxError extends Error {
  readonly offset: number

  constructor(message: string, offset: number) {
    super(`${message} at byte ${offset}`)
    this.offset = offset
  }
}

const QUOTE = 0x22
const BACKSLASH = 0x5c
const COMMA = 0x2c
const COLON = 0x3a
const LBRACE = 0x7b
const RBRACE = 0x7d
const LBRACKET = 0x5b
const RBRACKET = 0x5d
const MINUS = 0x2d
const PLUS = 0x2b
const DOT = 0x2e
const ZERO = 0x30
const NINE = 0x39
const IN_OBJECT = 1
const IN_ARRAY = 2

const isDigit = (c: number | undefined): boolean => c !== undefined && c >= ZERO && c <= NINE

function skipWhitespace(b: Buffer, i: number): number {
  const n = b.length
  while (i < n) {
    const c = b[i]
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return i
    i++
  }
  return i
}

function fail(b: Buffer, i: number): never {
  if (i >= b.length) throw new JSONSyntaxError('unexpected end of JSON', i)
  throw new JSONSyntaxError(`unexpected ${JSON.stringify(String.fromCharCode(b[i] ?? 0))}`, i)
}

const HEX = new Uint8Array(128)
for (const c of '0123456789abcdefABCDEF') HEX[c.charCodeAt(0)] = 1
const ESCAPES = new Uint8Array(128)
for (const c of '"\\/bfnrt') ESCAPES[c.charCodeAt(0)] = 1

/**
 * The nesting stack skipValue starts with, shared by every document: reading is synchronous and
 * never re-entered, so no two documents use it at once. A document nested deeper grows a stack of
 * its own, which goes with it. One per document was ~0.1 µs of a review's CPU (a typed array
 * allocated; docs/benchmarks.md, "Twenty-ninth pass").
 */
const sharedStack = new Uint8Array(64)

/**
 * A reader's working state, made once per document: the escapes seen (a string without any is
 * decoded without JSON.parse) and the nesting stack of skipValue, grown as a document needs.
 */
class Escapes {
  count = 0
  stack = sharedStack
}

/** From the opening quote to just past the closing one. */
function skipString(b: Buffer, i: number, escapes: Escapes): number {
  const n = b.length
  i++
  while (i < n) {
    const c = b[i] ?? 0
    if (c === QUOTE) return i + 1
    if (c === BACKSLASH) {
      escapes.count++
      const e = b[i + 1]
      if (e === 0x75) {
        for (let k = i + 2; k < i + 6; k++) if (k >= n || HEX[b[k] ?? 0] !== 1) fail(b, k)
        i += 6
      } else if (e !== undefined && e < 128 && ESCAPES[e] === 1) {
        i += 2
      } else {
        fail(b, i + 1)
      }
    } else if (c < 0x20) {
      fail(b, i)
    } else {
      i++
    }
  }
  return fail(b, i)
}

function skipNumber(b: Buffer, i: number): number {
  if (b[i] === MINUS) i++
  if (b[i] === ZERO) i++
  else if (isDigit(b[i])) while (isDigit(b[i])) i++
  else fail(b, i)
  if (b[i] === DOT) {
    i++
    if (!isDigit(b[i])) fail(b, i)
    while (isDigit(b[i])) i++
  }
  if (b[i] === 0x65 || b[i] === 0x45) {
    i++
    if (b[i] === PLUS || b[i] === MINUS) i++
    if (!isDigit(b[i])) fail(b, i)
    while (isDigit(b[i])) i++
  }
  return i
}

function skipLiteral(b: Buffer, i: number, literal: string): number {
  for (let k = 0; k < literal.length; k++) if (b[i + k] !== literal.charCodeAt(k)) fail(b, i + k)
  return i + literal.length
}

/** A key and its colon, from the opening quote; returns the position after the colon. */
function skipKey(b: Buffer, i: number, escapes: Escapes): number {
  if (b[i] !== QUOTE) fail(b, i)
  i = skipWhitespace(b, skipString(b, i, escapes))
  if (b[i] !== COLON) fail(b, i)
  return i + 1
}

/**
 * Checks one value from `start` (whitespace allowed before it) and returns the position after
 * it. Iterative, with an explicit stack, so nesting depth costs a byte a level, not a stack frame.
 */
function skipValue(b: Buffer, start: number, escapes: Escapes): number {
  const n = b.length
  let stack = escapes.stack
  let depth = 0
  let i = start
  for (;;) {
    i = skipWhitespace(b, i)
    const c = b[i]
    if (c === QUOTE) {
      i = skipString(b, i, escapes)
    } else if (c === LBRACE || c === LBRACKET) {
      i = skipWhitespace(b, i + 1)
      if (b[i] === (c === LBRACE ? RBRACE : RBRACKET)) {
        i++
      } else {
        if (depth === stack.length) {
          const grown = new Uint8Array(depth * 2)
          grown.set(stack)
          stack = grown
          escapes.stack = grown
        }
        stack[depth++] = c === LBRACE ? IN_OBJECT : IN_ARRAY
        if (c === LBRACE) i = skipKey(b, i, escapes)
        continue
      }
    } else if (c === 0x74) {
      i = skipLiteral(b, i, 'true')
    } else if (c === 0x66) {
      i = skipLiteral(b, i, 'false')
    } else if (c === 0x6e) {
      i = skipLiteral(b, i, 'null')
    } else if (c === MINUS || isDigit(c)) {
      i = skipNumber(b, i)
    } else {
      fail(b, i)
    }
    // After a value: close what ends here, until the next element or the end of this value.
    for (;;) {
      if (depth === 0) return i
      i = skipWhitespace(b, i)
      if (i >= n) fail(b, i)
      const d = b[i++]
      const inObject = stack[depth - 1] === IN_OBJECT
      if (d === COMMA) {
        if (inObject) i = skipKey(b, skipWhitespace(b, i), escapes)
        break
      }
      if (d !== (inObject ? RBRACE : RBRACKET)) fail(b, i - 1)
      depth--
    }
  }
}

function typeAt(c: number | undefined): JSONType {
  switch (c) {
    case LBRACE: return 'object'
    case LBRACKET: return 'array'
    case QUOTE: return 'string'
    case 0x74: case 0x66: return 'boolean'
    case 0x6e: return 'null'
    default: return 'number'
  }
}

/**
 * Documents up to this size that are all ASCII are decoded to text once, and each string read is a
 * slice of it: one decode instead of one Buffer#toString (a call into C++) for every string read.
 * An AdmissionReview of a ServiceCIDR is ~1 KB and reads ~15 strings: read in 2.4 µs against 3.2
 * in a loop (docs/benchmarks.md, "Sixteenth pass"). Larger documents are not copied whole: the
 * bodies a flood sends are mostly skipped, and their text would cost their size again in memory.
 */
const wholeTextBytes = 16 * 1024

/**
 * Where an array of strings is gathered before it is copied out at its own length: an array grown
 * by push from empty takes room for 17 items (V8's first growth, ~150 bytes), and a review reads
 * two or three such arrays of one or two items. Shared like sharedStack: reading never re-enters.
 * It keeps room for 64 items between documents, and none of their strings.
 */
const scratchItems: string[] = []

/**
 * Whether the string without escapes from `start` (its opening quote) to `end` (past its closing
 * one) holds exactly `bytes`. Compared byte by byte: for strings this short, a call into
 * Buffer#compare costs more.
 */
function isStringAt(b: Buffer, start: number, end: number, bytes: Buffer): boolean {
  const length = end - start - 2
  if (bytes.length !== length) return false
  for (let k = 0; k < length; k++) {
    if (bytes[k] !== b[start + 1 + k]) return false
  }
  return true
}
const noKnown: StringShape['known'] = []

class Reader {
  private readonly b: Buffer
  private pos = 0
  private readonly escapes = new Escapes()
  /** Mismatches made while reading, including any that a later duplicate key replaced. */
  mismatches = 0
  /** The document as text, when it is small and ASCII: a byte's offset is then its character's. */
  private readonly text: string | undefined

  constructor(bytes: Buffer) {
    this.b = bytes
    // For ASCII, latin1 decoding is UTF-8 decoding (and Buffer#toString's, which JSON.parse sees).
    this.text = bytes.length <= wholeTextBytes && isAscii(bytes) ? bytes.toString('latin1') : undefined
  }

  document(shape: Shape): Value {
    const value = this.value(shape)
    this.pos = skipWhitespace(this.b, this.pos)
    if (this.pos !== this.b.length) fail(this.b, this.pos)
    return value
  }

  private mismatch(shape: Shape): Mismatch {
    const found = typeAt(this.b[this.pos])
    this.pos = skipValue(this.b, this.pos, this.escapes)
    this.mismatches++
    return new Mismatch(shape.type, found)
  }

  private value(shape: Shape): Value {
    this.pos = skipWhitespace(this.b, this.pos)
    const c = this.b[this.pos]
    switch (shape.type) {
      case 'string':
        return c === QUOTE ? this.string(shape.known) : this.mismatch(shape)
      case 'boolean':
        if (c === 0x74 || c === 0x66) return this.literal(c === 0x74 ? 'true' : 'false') === 'true'
        return this.mismatch(shape)
      case 'strings':
        return c === LBRACKET ? this.strings(shape.maxItems) : this.mismatch(shape)
      case 'objects':
        return c === LBRACKET ? this.objects(shape.item) : this.mismatch(shape)
      case 'object':
        if (c === 0x6e && shape.nullable) {
          this.literal('null')
          return null
        }
        return c === LBRACE ? this.object(shape) : this.mismatch(shape)
    }
  }

  private literal(text: string): string {
    this.pos = skipLiteral(this.b, this.pos, text)
    return text
  }

  /** A string from its opening quote, decoded as JSON.parse decodes it; one of `known` if its bytes are. */
  private string(known: StringShape['known'] = noKnown): string {
    const b = this.b
    const start = this.pos
    const before = this.escapes.count
    this.pos = skipString(b, start, this.escapes)
    if (this.escapes.count !== before) return JSON.parse(b.toString('utf8', start, this.pos)) as string
    for (const value of known) {
      if (isStringAt(b, start, this.pos, value.bytes)) return value.text
    }
    return this.text === undefined ? b.toString('utf8', start + 1, this.pos - 1) : this.text.slice(start + 1, this.pos - 1)
  }

  private strings(maxItems: number): readonly string[] | Mismatch {
    this.pos = skipWhitespace(this.b, this.pos + 1)
    if (this.b[this.pos] === RBRACKET) {
      this.pos++
      return []
    }
    const items = scratchItems
    let kept = 0
    let index = -1
    let count = 0
    try {
      for (;;) {
        this.pos = skipWhitespace(this.b, this.pos)
        if (this.b[this.pos] === QUOTE && index === -1 && count < maxItems) {
          // Written over what the last array left; pushed only past the room it has.
          if (kept < items.length) items[kept] = this.string()
          else items.push(this.string())
          kept++
        } else {
          if (this.b[this.pos] !== QUOTE && index === -1) index = count
          this.pos = skipValue(this.b, this.pos, this.escapes)
        }
        count++
        this.pos = skipWhitespace(this.b, this.pos)
        const d = this.b[this.pos++]
        if (d === RBRACKET) break
        if (d !== COMMA) fail(this.b, this.pos - 1)
      }
      if (index === -1 && count <= maxItems) return items.slice(0, kept)
    } finally {
      // Nothing of a document stays here until the next one; the room does, up to 64 items.
      for (let k = 0; k < kept; k++) items[k] = ''
      if (items.length > 64) items.length = 64
    }
    this.mismatches++
    return index === -1 ? new Mismatch('strings', 'array', -1, true) : new Mismatch('strings', 'array', index)
  }

  private objects(item: ObjectShape): readonly ReadObject[] | Mismatch {
    const items: ReadObject[] = []
    let index = -1
    this.pos = skipWhitespace(this.b, this.pos + 1)
    if (this.b[this.pos] === RBRACKET) {
      this.pos++
      return items
    }
    for (let count = 0; ; count++) {
      this.pos = skipWhitespace(this.b, this.pos)
      if (this.b[this.pos] === LBRACE && index === -1) items.push(this.object(item))
      else {
        if (this.b[this.pos] !== LBRACE && index === -1) index = count
        this.pos = skipValue(this.b, this.pos, this.escapes)
      }
      this.pos = skipWhitespace(this.b, this.pos)
      const d = this.b[this.pos++]
      if (d === RBRACKET) break
      if (d !== COMMA) fail(this.b, this.pos - 1)
    }
    if (index === -1) return items
    this.mismatches++
    return new Mismatch('objects', 'array', index)
  }

  private object(shape: ObjectShape): ReadObject {
    const result: Record<string, Value> = {}
    const b = this.b
    this.pos = skipWhitespace(b, this.pos + 1)
    if (b[this.pos] === RBRACE) {
      this.pos++
      return result
    }
    for (;;) {
      this.pos = skipWhitespace(b, this.pos)
      if (b[this.pos] !== QUOTE) fail(b, this.pos)
      const field = this.field(shape)
      this.pos = skipWhitespace(b, this.pos)
      if (b[this.pos] !== COLON) fail(b, this.pos)
      this.pos++
      if (field === undefined) this.pos = skipValue(b, this.pos, this.escapes)
      else result[field.name] = this.value(field.shape)
      this.pos = skipWhitespace(b, this.pos)
      const d = b[this.pos++]
      if (d === RBRACE) return result
      if (d !== COMMA) fail(b, this.pos - 1)
    }
  }

  /** The key at the current position, matched against the shape's fields without decoding it when it holds no escape. */
  private field(shape: ObjectShape): ObjectShape['fields'][number] | undefined {
    const b = this.b
    const start = this.pos
    const before = this.escapes.count
    this.pos = skipString(b, start, this.escapes)
    if (this.escapes.count !== before) {
      const key = JSON.parse(b.toString('utf8', start, this.pos)) as string
      return shape.fields.find((field) => field.name === key)
    }
    for (const field of shape.fields) {
      if (isStringAt(b, start, this.pos, field.bytes)) return field
    }
    return undefined
  }
}

/** Reads `bytes` as one JSON document of the given shape. Throws JSONSyntaxError for anything JSON.parse would refuse. */
export function readJSON(bytes: Buffer, shape: Shape): Value {
  return readDocument(bytes, shape).value
}

/**
 * readJSON, and how many Mismatches it made. At 0 the value holds none, and a caller that looks for
 * them (src/admission/review.ts) need not walk it.
 */
export function readDocument(bytes: Buffer, shape: Shape): { readonly value: Value, readonly mismatches: number } {
  const reader = new Reader(bytes)
  const value = reader.document(shape)
  return { value, mismatches: reader.mismatches }
}
