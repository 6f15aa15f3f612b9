// Just enough of the Prometheus text format to read two histograms: samples with labels, a histogram
// merged over label sets (and over scrapes), and quantiles estimated from its buckets the way
// PromQL's histogram_quantile does.

export interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

const samplePattern = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/
const labelPattern = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g

export function parseSamples(text: string): Sample[] {
  const samples: Sample[] = []
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const match = samplePattern.exec(line)
    if (match?.[1] === undefined || match[3] === undefined) continue
    const labels: Record<string, string> = {}
    for (const [, key, value] of (match[2] ?? '').matchAll(labelPattern)) {
      if (key !== undefined) labels[key] = (value ?? '').replace(/\\(.)/g, (_all, char: string) => (char === 'n' ? '\n' : char))
    }
    samples.push({ name: match[1], labels, value: Number(match[3]) })
  }
  return samples
}

export interface Histogram {
  count: number
  sum: number
  /** Cumulative counts by upper bound, ascending; the last is +Inf. */
  buckets: { le: number, count: number }[]
}

export function emptyHistogram(): Histogram {
  return { count: 0, sum: 0, buckets: [] }
}

/** Adds every series of histogram `name` whose labels include `match` into one histogram. */
export function histogram(samples: readonly Sample[], name: string, match: Readonly<Record<string, string>> = {}, into: Histogram = emptyHistogram()): Histogram {
  const matches = (sample: Sample): boolean => Object.entries(match).every(([key, value]) => sample.labels[key] === value)
  const byBound = new Map(into.buckets.map((bucket) => [bucket.le, bucket.count]))
  for (const sample of samples) {
    if (!matches(sample)) continue
    if (sample.name === `${name}_count`) into.count += sample.value
    else if (sample.name === `${name}_sum`) into.sum += sample.value
    else if (sample.name === `${name}_bucket`) {
      const le = sample.labels['le'] === '+Inf' ? Infinity : Number(sample.labels['le'])
      byBound.set(le, (byBound.get(le) ?? 0) + sample.value)
    }
  }
  into.buckets = [...byBound.entries()].sort(([a], [b]) => a - b).map(([le, count]) => ({ le, count }))
  return into
}

export function mergeHistograms(parts: readonly Histogram[]): Histogram {
  const merged = emptyHistogram()
  const byBound = new Map<number, number>()
  for (const part of parts) {
    merged.count += part.count
    merged.sum += part.sum
    for (const { le, count } of part.buckets) byBound.set(le, (byBound.get(le) ?? 0) + count)
  }
  merged.buckets = [...byBound.entries()].sort(([a], [b]) => a - b).map(([le, count]) => ({ le, count }))
  return merged
}

/**
 * histogram_quantile: finds the bucket holding the q-th observation and interpolates linearly inside
 * it (the lowest bucket starts at 0). Undefined without observations. An estimate that lands in the
 * +Inf bucket is reported as the highest finite bound, as Prometheus does.
 */
export function quantile(q: number, h: Histogram): number | undefined {
  const total = h.buckets.at(-1)?.count ?? 0
  if (total === 0) return undefined
  const rank = q * total
  let previousBound = 0
  let previousCount = 0
  for (const { le, count } of h.buckets) {
    if (count >= rank) {
      if (le === Infinity) return previousBound
      if (count === previousCount) return le
      return previousBound + (le - previousBound) * ((rank - previousCount) / (count - previousCount))
    }
    previousBound = le
    previousCount = count
  }
  return previousBound
}

/** What `after` observed since `before` (two scrapes of one process, counters not reset between). */
export function since(after: Histogram, before: Histogram): Histogram {
  const earlier = new Map(before.buckets.map((bucket) => [bucket.le, bucket.count]))
  return {
    count: after.count - before.count,
    sum: after.sum - before.sum,
    buckets: after.buckets.map(({ le, count }) => ({ le, count: count - (earlier.get(le) ?? 0) })),
  }
}

/**
 * The smallest bucket bound that holds every observation of `h`: the slowest one took at most this
 * long (Infinity when it fell past the highest finite bound). Undefined without observations.
 */
export function slowestWithin(h: Histogram): number | undefined {
  const total = h.buckets.at(-1)?.count ?? 0
  if (total === 0) return undefined
  return h.buckets.find((bucket) => bucket.count >= total)?.le
}

/** The value of a counter (summed over the series whose labels include `match`). */
export function counter(samples: readonly Sample[], name: string, match: Readonly<Record<string, string>> = {}): number {
  return samples
    .filter((sample) => sample.name === name && Object.entries(match).every(([key, value]) => sample.labels[key] === value))
    .reduce((sum, sample) => sum + sample.value, 0)
}

export interface LatencySummary {
  readonly count: number
  readonly sumSeconds: number
  readonly meanMs: number | undefined
  readonly p50Ms: number | undefined
  readonly p99Ms: number | undefined
}

const ms = (seconds: number | undefined): number | undefined => (seconds === undefined ? undefined : Math.round(seconds * 1e6) / 1e3)

export function summarize(h: Histogram): LatencySummary {
  return {
    count: h.count,
    sumSeconds: h.sum,
    meanMs: h.count === 0 ? undefined : ms(h.sum / h.count),
    p50Ms: ms(quantile(0.5, h)),
    p99Ms: ms(quantile(0.99, h)),
  }
}
