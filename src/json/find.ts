// One string member of a JSON document, found without building the rest: what a Lease write needs
// from kube-apiserver's answer (its new metadata.resourceVersion), where JSON.parse would build the
// whole Lease, reservations and all (up to 200 KiB), for every write (src/cluster/lease.ts).
//
// It reads the document only up to that member, and does not validate it: it is for documents a
// trusted peer sent as JSON (kube-apiserver's answer over TLS), and a caller that must know the
// document is JSON parses it. A member it cannot find so (not there, or a key written with escapes)
// is answered undefined, and the caller then parses the whole document. Of duplicate keys the first
// counts (JSON.parse keeps the last); encoding/json, which writes kube-apiserver's JSON, writes a
// key once. No I/O.

const quote = 0x22
const backslash = 0x5c
const colon = 0x3a
const openBrace = 0x7b
const closeBrace = 0x7d
const openBracket = 0x5b
const closeBracket = 0x5d

/** Whitespace as RFC 8259 defines it: space, tab, line feed, carriage return. */
function isSpace(code: number): boolean {
  return code === 0x20 || code === 0x09 || code === 0x0a || code === 0x0d
}

/** Where the string that opens at `start` (a quote) closes, or -1 if it does not. */
function stringEnd(text: string, start: number): number {
  for (let end = text.indexOf('"', start + 1); end !== -1; end = text.indexOf('"', end + 1)) {
    // A quote is escaped by an odd number of backslashes before it.
    let before = end - 1
    while (text.charCodeAt(before) === backslash) before--
    if ((end - 1 - before) % 2 === 0) return end
  }
  return -1
}

/** A JSON string literal's value; undefined if its escapes are not JSON's. */
function unescaped(literal: string): string | undefined {
  try {
    return JSON.parse(literal) as string
  } catch {
    return undefined
  }
}

/** Whether the string from quote `at` to quote `end` is `key` as written, without an escape. */
function isKey(text: string, at: number, end: number, key: string): boolean {
  return end - at - 1 === key.length && text.startsWith(key, at + 1)
}

function skipSpace(text: string, from: number): number {
  let at = from
  while (isSpace(text.charCodeAt(at))) at++
  return at
}

/**
 * The string at `path` (object keys, from the top) of the JSON document `text`, or undefined if the
 * document holds none there, or holds something else (a number, an object), or this reading cannot
 * tell (see above). `stringAt('{"metadata":{"resourceVersion":"7"}}', ['metadata', 'resourceVersion'])`
 * is '7'.
 */
export function stringAt(text: string, path: readonly string[]): string | undefined {
  if (path.length === 0) return undefined
  // How many containers enclose the scan, and how many of those, from the top, are the objects
  // `path` leads through: while the scan is directly inside the last of them, depth is matched + 1.
  let depth = 0
  let matched = 0
  for (let at = skipSpace(text, 0); at < text.length; at++) {
    const code = text.charCodeAt(at)
    if (code === quote) {
      const end = stringEnd(text, at)
      if (end === -1) return undefined
      const next = skipSpace(text, end + 1)
      // Only a key is followed by a colon.
      if (text.charCodeAt(next) === colon && depth === matched + 1 && isKey(text, at, end, path[matched] ?? '')) {
        const value = skipSpace(text, next + 1)
        if (matched + 1 === path.length) {
          if (text.charCodeAt(value) !== quote) return undefined
          const valueEnd = stringEnd(text, value)
          if (valueEnd === -1) return undefined
          const raw = text.slice(value + 1, valueEnd)
          return raw.includes('\\') ? unescaped(text.slice(value, valueEnd + 1)) : raw
        }
        if (text.charCodeAt(value) !== openBrace) return undefined
        depth++
        matched++
        at = value
        continue
      }
      at = end
    } else if (code === openBrace || code === openBracket) {
      depth++
    } else if (code === closeBrace || code === closeBracket) {
      // The object the path leads through ends without the member.
      if (matched > 0 && depth === matched + 1) return undefined
      depth--
      if (depth <= 0) return undefined
    }
  }
  return undefined
}
