// Settings for the property-based tests (fast-check). A run uses a fresh random seed, so that
// every run explores new inputs; a failure prints the seed and the path of the shrunk case, and
//   FUZZ_SEED=<seed> FUZZ_PATH=<path> npm run test:unit -- <file>
// replays exactly that case. A case worth keeping becomes a named regression test.

import type { Parameters } from 'fast-check'

export function fuzzParameters<T>(numRuns: number): Parameters<T> {
  const seed = process.env['FUZZ_SEED']
  const path = process.env['FUZZ_PATH']
  return {
    numRuns,
    ...(seed === undefined ? {} : { seed: Number(seed) }),
    ...(path === undefined ? {} : { path }),
  }
}
