// ServiceCIDRs and IPAddresses from files: manifests, and cluster dumps as
// `kubectl get servicecidrs,ipaddresses -o yaml` (or -o json) prints them. Pure: text in, objects
// or a ClusterState out; the command line reads the files. Every problem names the file and the
// document (and the item of a List) it was found in.

import { readYAMLDocuments, StreamedItems, YAMLSyntaxError } from '../config/yaml.ts'
import { invalidIPAddressName, parseCIDR, type Parsed } from '../policy/ip.ts'
import { ClusterState, toIPAddressRecord, toServiceCIDRRecord, type ObjectLike } from '../policy/state.ts'
import type { IPAddressRecord, ServiceCIDRRecord } from '../policy/types.ts'

/**
 * Why a file could not be read or parsed, in one line: the usual system errors in words, else the
 * first line of the message (a YAML parser's goes on with a snippet of the file).
 */
export function describeReadError(error: unknown): string {
  const code = typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : undefined
  switch (code) {
    case 'ENOENT':
      return 'no such file'
    case 'EISDIR':
      return 'is a directory, not a file'
    case 'EACCES':
      return 'permission denied'
    default:
      return (error instanceof Error ? error.message : String(error)).split('\n', 1)[0] ?? ''
  }
}

const group = 'networking.k8s.io'
/** Every version whose ServiceCIDR spec is `{cidrs: string[]}` and IPAddress spec `{parentRef}`. */
const versions = ['v1', 'v1beta1', 'v1alpha1']
const kinds = ['ServiceCIDR', 'IPAddress'] as const
type Kind = (typeof kinds)[number]

/** Where an object was read: file, document (1-based) and, inside a List, the item (0-based). */
export interface Location {
  readonly file: string
  readonly document: number
  readonly item: number | undefined
}

export function describeLocation({ file, document, item }: Location): string {
  return `${file}, document ${document}${item === undefined ? '' : `, items[${item}]`}`
}

export interface Located {
  readonly object: ObjectLike
  readonly location: Location
}

export interface FileObjects {
  readonly serviceCIDRs: readonly Located[]
  readonly ipAddresses: readonly Located[]
}

class FileError extends Error {}

const fail = (location: Location, problem: string): never => {
  throw new FileError(`${describeLocation(location)}: ${problem}`)
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

const isStringArray = (value: unknown): value is string[] =>
  Array.isArray(value) && value.every((item) => typeof item === 'string')

const isStringMap = (value: unknown): value is Record<string, string> =>
  isRecord(value) && Object.values(value).every((item) => typeof item === 'string')

function versionOf(apiVersion: unknown): string | undefined {
  if (typeof apiVersion !== 'string') return undefined
  const [prefix, version] = apiVersion.split('/')
  return prefix === group && version !== undefined && versions.includes(version) ? version : undefined
}

/** Checks the fields this project reads, as the apiserver's decoder would refuse their wrong types. */
function toObject(raw: Record<string, unknown>, kind: Kind, location: Location): ObjectLike {
  const { metadata, spec } = raw
  if (!isRecord(metadata) || metadata['name'] === undefined || metadata['name'] === null || metadata['name'] === '') {
    return fail(location, `${kind} has no metadata.name`)
  }
  if (typeof metadata['name'] !== 'string') return fail(location, `${kind}: metadata.name must be a string, not ${describeValue(metadata['name'])}`)
  const name = metadata['name']
  const labels = metadata['labels']
  if (labels !== undefined && labels !== null && !isStringMap(labels)) return fail(location, `${kind} "${name}": metadata.labels must map strings to strings`)
  if (spec !== undefined && spec !== null && !isRecord(spec)) return fail(location, `${kind} "${name}": spec must be an object`)
  const meta = {
    name,
    labels: isStringMap(labels) ? labels : undefined,
    deletionTimestamp: metadata['deletionTimestamp'] ?? undefined,
  }
  if (kind === 'ServiceCIDR') {
    const cidrs = spec?.['cidrs'] ?? []
    if (!isStringArray(cidrs)) return fail(location, `ServiceCIDR "${name}": spec.cidrs must be a list of strings`)
    return { metadata: meta, spec: { cidrs } }
  }
  const parentRef = spec?.['parentRef']
  if (parentRef !== undefined && parentRef !== null && !isStringMap(parentRef)) {
    return fail(location, `IPAddress "${name}": spec.parentRef must have string fields (group, resource, namespace, name)`)
  }
  return { metadata: meta, spec: isStringMap(parentRef) ? { parentRef } : {} }
}

/** What a value is, for a message: "a number", "a list", "null". */
function describeValue(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'a list'
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`
}

function describeKind(raw: Record<string, unknown>): string {
  const kind = typeof raw['kind'] === 'string' ? raw['kind'] : '(no kind)'
  const apiVersion = typeof raw['apiVersion'] === 'string' ? raw['apiVersion'] : '(no apiVersion)'
  return `${kind} ${apiVersion}`
}

const expected = `expected a ServiceCIDR or IPAddress of ${group} (${versions.join(', ')}), or a List of them`

function collect(raw: unknown, location: Location, into: { serviceCIDRs: Located[], ipAddresses: Located[] }, defaults?: { kind: Kind, apiVersion: string }): void {
  if (!isRecord(raw)) return fail(location, `${expected}; found ${describeValue(raw)}`)
  const kind = raw['kind'] ?? defaults?.kind
  const apiVersion = raw['apiVersion'] ?? defaults?.apiVersion
  if (location.item === undefined && (kind === 'List' || (typeof kind === 'string' && kind.endsWith('List')))) {
    // `kubectl get -o yaml` prints `kind: List` whose items carry their own kind; the API's own
    // ServiceCIDRList and IPAddressList leave kind and apiVersion off their items.
    const itemKind = kind.slice(0, -'List'.length)
    const itemDefaults = kinds.find((known) => known === itemKind)
    if (kind !== 'List' && (itemDefaults === undefined || versionOf(apiVersion) === undefined)) {
      return fail(location, `${expected}; found ${describeKind(raw)}`)
    }
    const items = raw['items'] ?? []
    if (!Array.isArray(items) && !(items instanceof StreamedItems)) return fail(location, `${kind}: items must be a list`)
    // A large kubectl List arrives as StreamedItems: each item is parsed here, reduced to what this
    // project reads, and dropped, so the full objects are never all held at once.
    let index = 0
    for (const item of items as Iterable<unknown>) {
      collect(item, { ...location, item: index++ }, into, itemDefaults && { kind: itemDefaults, apiVersion: apiVersion as string })
    }
    return
  }
  const known = kinds.find((candidate) => candidate === kind)
  if (known === undefined || versionOf(apiVersion) === undefined) {
    return fail(location, `${expected}; found ${describeKind({ ...raw, kind, apiVersion })}`)
  }
  const object = toObject(raw, known, location)
  if (known === 'ServiceCIDR') into.serviceCIDRs.push({ object, location })
  else into.ipAddresses.push({ object, location })
}

/**
 * Whether text is a JSON document: `kubectl get -o json` output for 100,000 IPAddresses is tens of
 * megabytes, which JSON.parse reads many times faster than a YAML parser. Anything else (and JSON
 * with a syntax error, to get the YAML parser's line and column) goes through YAML.
 */
function parseJSON(text: string): { ok: true, value: unknown } | undefined {
  const start = /^\s*[{[]/.test(text)
  if (!start) return undefined
  try {
    return { ok: true, value: JSON.parse(text) as unknown }
  } catch {
    return undefined
  }
}

/** Reads every ServiceCIDR and IPAddress in one file (YAML or JSON, any number of documents). */
export function readObjects(text: string, file: string): Parsed<FileObjects> {
  const into = { serviceCIDRs: [] as Located[], ipAddresses: [] as Located[] }
  try {
    const json = parseJSON(text)
    if (json !== undefined) {
      collect(json.value, { file, document: 1, item: undefined }, into)
    } else {
      let document = 1
      try {
        for (const { number, value } of readYAMLDocuments(text)) {
          document = number
          // Empty documents (a trailing `---`) are skipped, as kubectl skips them.
          if (value !== null && value !== undefined) collect(value, { file, document, item: undefined }, into)
        }
      } catch (error) {
        // The error is thrown while the next document is read: its own number is the one to name.
        if (error instanceof YAMLSyntaxError) fail({ file, document: error.document ?? document, item: undefined }, `not valid YAML: ${error.message}`)
        throw error
      }
    }
  } catch (error) {
    if (error instanceof FileError) return { ok: false, error: error.message }
    throw error
  }
  return { ok: true, value: into }
}

/** The ServiceCIDRs to create from manifest files; IPAddresses there are refused (the allocator writes them). */
export function readManifests(files: readonly FileObjects[]): Parsed<readonly Located[]> {
  for (const { ipAddresses } of files) {
    const [first] = ipAddresses
    if (first !== undefined) {
      return { ok: false, error: `${describeLocation(first.location)}: a manifest may hold only ServiceCIDRs; IPAddress "${first.object.metadata?.name ?? ''}" belongs in a --cluster file` }
    }
  }
  return { ok: true, value: files.flatMap((file) => file.serviceCIDRs) }
}

/**
 * Builds the cluster as the files describe it. The apiserver stores only valid objects, so a
 * ServiceCIDR whose CIDR does not parse, an IPAddress whose name is not an IP, or a name given twice
 * means the files are not a dump of a real cluster.
 */
export function buildClusterState(files: readonly FileObjects[]): Parsed<ClusterState> {
  const serviceCIDRs = new Map<string, { record: ServiceCIDRRecord, location: Location }>()
  const ipAddresses = new Map<string, { record: IPAddressRecord, location: Location }>()
  for (const file of files) {
    for (const { object, location } of file.serviceCIDRs) {
      const record = toServiceCIDRRecord(object)
      if (record === undefined) return { ok: false, error: `${describeLocation(location)}: ServiceCIDR has no metadata.name` }
      const [invalid] = record.invalid
      if (invalid !== undefined) {
        const reason = parseCIDR(invalid)
        return { ok: false, error: `${describeLocation(location)}: ServiceCIDR "${record.name}" has CIDR "${invalid}", which ${reason.ok ? 'is invalid' : reason.error}` }
      }
      const seen = serviceCIDRs.get(record.name)
      if (seen !== undefined) return { ok: false, error: `${describeLocation(location)}: ServiceCIDR "${record.name}" is also in ${describeLocation(seen.location)}` }
      serviceCIDRs.set(record.name, { record, location })
    }
    for (const { object, location } of file.ipAddresses) {
      // Names as kube-apiserver validates them: canonical, so that one address has one name.
      const name = object.metadata?.name ?? ''
      const record = toIPAddressRecord(object)
      const invalid = invalidIPAddressName(name, record)
      if (record === undefined || invalid !== undefined) {
        return { ok: false, error: `${describeLocation(location)}: IPAddress "${name}" is not named as Kubernetes names one: ${invalid ?? 'not an IP address'}` }
      }
      const seen = ipAddresses.get(record.name)
      if (seen !== undefined) return { ok: false, error: `${describeLocation(location)}: IPAddress "${record.name}" is also in ${describeLocation(seen.location)}` }
      ipAddresses.set(record.name, { record, location })
    }
  }
  const state = new ClusterState()
  state.replaceServiceCIDRs([...serviceCIDRs.values()].map((entry) => entry.record))
  state.replaceIPAddresses([...ipAddresses.values()].map((entry) => entry.record))
  return { ok: true, value: state }
}
