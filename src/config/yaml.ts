// The project's one YAML library (js-yaml, YAML 1.2 core schema): reading policy files and the
// manifests and cluster dumps the command line reads, and writing what it prints. Pure: text in,
// values out, and back.
//
// A `kubectl get servicecidrs,ipaddresses -o yaml` dump of 100,000 IPAddresses is one document of
// tens of megabytes. Parsed whole, the parser's events and the full objects of every item are held at
// once (about 850 MiB). So a document shaped as kubectl prints a List (a block mapping whose `items:`
// sequence starts at column 0) is read in batches of items: each batch of `- ` entries is parsed when
// the caller's iteration reaches it, and can be dropped once the caller has taken what it needs. What
// this splitter is not sure about is parsed whole instead, so it never changes what a file means.
// bench/cli.ts measures both ways, and the parser this replaced.

import { dump, load, loadAll, YAMLException } from 'js-yaml'

/** A YAML syntax error, with its place in the whole text (line and column from 1). */
export class YAMLSyntaxError extends Error {
  readonly reason: string
  readonly line: number | undefined
  readonly column: number | undefined
  /** The document (from 1) it is in, when the text was read document by document. */
  readonly document: number | undefined

  constructor(reason: string, line: number | undefined, column: number | undefined, document?: number) {
    super(line === undefined || column === undefined ? reason : `${reason} at line ${line}, column ${column}`)
    this.name = 'YAMLSyntaxError'
    this.reason = reason
    this.line = line
    this.column = column
    this.document = document
  }
}

/** Where a part of the text is: its first line in the whole (0-based) and its document number. */
interface Place {
  readonly lineOffset: number
  readonly document?: number
}

/** Runs a js-yaml parse, turning its exception into a YAMLSyntaxError placed in the whole text. */
function parse<T>(run: () => T, place: Place = { lineOffset: 0 }): T {
  try {
    return run()
  } catch (error) {
    if (!(error instanceof YAMLException)) throw error
    const { mark } = error
    throw new YAMLSyntaxError(error.reason, mark && mark.line + 1 + place.lineOffset, mark && mark.column + 1, place.document)
  }
}

/** Every document of the text, parsed whole; throws YAMLSyntaxError. */
export function parseYAMLDocuments(text: string): unknown[] {
  return parse(() => loadAll(text))
}

/** Offsets of the `---` document markers: at column 0, alone or followed by a space or a comment. */
function markerOffsets(text: string): number[] {
  return [...text.matchAll(/^---(?=[ \t]*(#.*)?\r?$)/gm)].map((match) => match.index)
}

/** 1-based numbers of the lines that hold a `---` document marker. */
export function documentMarkerLines(text: string): number[] {
  return markerOffsets(text).map((offset) => lineAt(text, offset) + 1)
}

/** The 0-based line of an offset. */
function lineAt(text: string, offset: number): number {
  let line = 0
  for (let at = text.indexOf('\n'); at !== -1 && at < offset; at = text.indexOf('\n', at + 1)) line++
  return line
}

/** How many items of a List one parser call reads: about 100 KiB of kubectl's YAML. */
const itemsPerParse = 200

/** Where one item's text starts and ends in its document. */
interface Chunk {
  readonly start: number
  end: number
}

/**
 * The items of a List document, parsed a batch at a time as they are iterated. If a batch does not
 * parse on its own (an alias to an anchor in an earlier item, or a real syntax error), the whole
 * document is parsed instead: the items from there on come from that parse, or its error (with its
 * place in the file) is thrown.
 */
export class StreamedItems implements Iterable<unknown> {
  private readonly document: string
  private readonly place: Place
  private readonly chunks: readonly Chunk[]

  constructor(document: string, place: Place, chunks: readonly Chunk[]) {
    this.document = document
    this.place = place
    this.chunks = chunks
  }

  get length(): number {
    return this.chunks.length
  }

  *[Symbol.iterator](): Iterator<unknown> {
    // Consecutive items are one stretch of text, a block sequence of them: parsed a batch at a time,
    // so that a parser call's fixed cost is paid per batch, and only a batch's objects are held.
    for (let index = 0; index < this.chunks.length; index += itemsPerParse) {
      const count = Math.min(itemsPerParse, this.chunks.length - index)
      const first = this.chunks[index]
      const last = this.chunks[index + count - 1]
      if (first === undefined || last === undefined) return
      let items: unknown[]
      try {
        const parsed = load(this.document.slice(first.start, last.end))
        if (!Array.isArray(parsed) || parsed.length !== count) throw new Error('not the sequence entries expected')
        items = parsed
      } catch {
        yield* this.wholeFrom(index)
        return
      }
      yield* items
    }
  }

  private *wholeFrom(index: number): Generator {
    const whole = parse(() => load(this.document), this.place)
    const items = typeof whole === 'object' && whole !== null && 'items' in whole ? whole.items : undefined
    // The splitter only made chunks for a block mapping with an `items:` sequence.
    if (!Array.isArray(items)) throw new Error('a List read item by item has no items when read whole')
    yield* items.slice(index)
  }
}

/** A plain top-level key, as kubectl prints them: `items:`, `kind: List`. */
const topLevelKey = /^([A-Za-z_][A-Za-z0-9_.-]*):(?:[ \t]+([^\r]*))?\r?$/

/**
 * Splits one document shaped as kubectl prints a List into the document without its items (with
 * `items: []`) and the items' chunks. Undefined when the document is not exactly that shape: it is
 * then parsed whole. Only the lines at column 0 (keys and `- ` entries) are looked at: every other
 * line belongs to the node above it.
 */
function splitList(document: string): { head: string, chunks: Chunk[] } | undefined {
  const chunks: Chunk[] = []
  let key: string | undefined
  /** Where the `items:` line starts and ends, and where its sequence ends. */
  let items: { start: number, end: number, blockEnd: number } | undefined
  for (const match of document.matchAll(/^[^\s#].*$/gm)) {
    const line = match[0]
    const start = match.index
    const inItems = key === 'items'
    if (line === '-' || line.startsWith('- ')) {
      // An entry of the sequence of the current key: an item when that key is `items`.
      if (key === undefined) return undefined
      if (!inItems || items === undefined) continue
      const previous = chunks.at(-1)
      if (previous !== undefined) previous.end = start
      // Between `items:` and its first entry: only blank lines and comments, not an indented sequence.
      else if (/^[ \t]+[^\s#]/m.test(document.slice(items.end, start))) return undefined
      chunks.push({ start, end: document.length })
      items.blockEnd = document.length
      continue
    }
    const found = topLevelKey.exec(line)
    if (found === null) return undefined
    if (inItems && items !== undefined) {
      // The sequence under `items:` ends here; it must have had an entry at column 0.
      const previous = chunks.at(-1)
      if (previous === undefined) return undefined
      previous.end = start
      items.blockEnd = start
    }
    key = found[1]
    if (key !== 'items') continue
    // `items:` with its sequence on the lines below, once; `items: []` and the like are parsed whole.
    if (items !== undefined || (found[2] ?? '').replace(/\s*#.*$/, '') !== '') return undefined
    items = { start, end: start + line.length, blockEnd: start + line.length }
  }
  if (items === undefined || chunks.length === 0) return undefined
  return { head: `${document.slice(0, items.start)}items: []\n${document.slice(items.blockEnd)}`, chunks }
}

/** One document of a file: its number (from 1) and its value; a List's items may be StreamedItems. */
export interface YAMLDocument {
  readonly number: number
  readonly value: unknown
}

function readDocument(text: string, place: Place & { document: number }): unknown {
  const split = splitList(text)
  if (split !== undefined) {
    let head: unknown
    try {
      head = load(split.head)
    } catch {
      // Its line would be that of the document without its items: the whole parse below has the real one.
    }
    if (typeof head === 'object' && head !== null && !Array.isArray(head)) {
      return { ...head, items: new StreamedItems(text, place, split.chunks) }
    }
  }
  const [value = null] = parse(() => loadAll(text), place)
  return value
}

/**
 * The documents of a file in order, each parsed when the iteration reaches it; empty documents are
 * null. Throws YAMLSyntaxError, with its line in the whole text and its document.
 */
export function* readYAMLDocuments(text: string): Generator<YAMLDocument> {
  const markers = markerOffsets(text)
  // Whether a part holds a node: a line other than blank lines, comments and directives.
  const hasContent = (piece: string): boolean => /^(?!%)[ \t]*[^\s#]/m.test(piece)
  // Directives (%YAML, %TAG), document end markers (...) and markers with content (`--- {a: 1}`)
  // are legal but never in kubectl's output: such a file is parsed whole.
  if (/^(%|\.\.\.(\s|$)|---[ \t]+[^\s#])/m.test(text)) {
    let values: unknown[]
    try {
      values = parseYAMLDocuments(text)
    } catch (error) {
      if (!(error instanceof YAMLSyntaxError) || error.line === undefined) throw error
      // Its document: the markers above it, and the text before the first one if that holds a node.
      const line = error.line
      const above = documentMarkerLines(text).filter((marker) => marker <= line).length
      const document = above + (hasContent(text.slice(0, markers[0] ?? text.length)) ? 1 : 0)
      throw new YAMLSyntaxError(error.reason, error.line, error.column, Math.max(document, 1))
    }
    let number = 0
    for (const value of values) yield { number: ++number, value }
    return
  }
  // A marker at column 0 can never be inside a node, so the text splits at the markers. What comes
  // before the first marker is a document only if it holds more than blank lines and comments.
  const starts = [0, ...markers.map((offset) => text.indexOf('\n', offset) + 1 || text.length)]
  let number = 0
  let lineOffset = 0
  let counted = 0
  for (const [index, start] of starts.entries()) {
    lineOffset += lineAt(text.slice(counted, start), start - counted)
    counted = start
    const piece = text.slice(start, markers[index] ?? text.length)
    if (index === 0 && !hasContent(piece)) continue
    number++
    yield { number, value: readDocument(piece, { lineOffset, document: number }) }
  }
}

/**
 * Objects as a YAML stream that `kubectl apply -f` reads: each a document after a `---` marker,
 * below a comment (lines without their `# `).
 */
export function writeYAMLDocuments(objects: readonly unknown[], comment: readonly string[] = []): string {
  const header = comment.map((line) => (line === '' ? '#' : `# ${line}`)).join('\n')
  // noRefs: an object used twice is written twice, never as an anchor and alias. No folding: a
  // string with line breaks is written as a literal block, line by line.
  const documents = objects.map((object) => `---\n${dump(object, { noRefs: true, lineWidth: -1, quoteStyle: 'double' })}`)
  return [...(header === '' ? [] : [`${header}\n`]), ...documents].join('')
}
