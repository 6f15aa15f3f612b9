// Decision time alone: decide() called in-process on one synthetic cluster, timed per call.

import { decide } from '../src/policy/engine.ts'
import type { ClusterState } from '../src/policy/state.ts'
import type { Policy, ReviewRequest } from '../src/policy/types.ts'

export interface DecisionTiming {
  readonly calls: number
  readonly p50us: number
  readonly p99us: number
  readonly meanus: number
  readonly allowed: boolean
  readonly message: string
}

export function timeDecisions(policy: Policy, state: ClusterState, request: ReviewRequest, calls: number): DecisionTiming {
  for (let i = 0; i < Math.min(1000, calls); i++) decide(policy, state, request)
  const samples = new Float64Array(calls)
  let last = decide(policy, state, request)
  for (let i = 0; i < calls; i++) {
    const start = process.hrtime.bigint()
    last = decide(policy, state, request)
    samples[i] = Number(process.hrtime.bigint() - start) / 1000
  }
  samples.sort()
  const at = (p: number): number => samples[Math.min(calls - 1, Math.floor((p / 100) * calls))]!
  return {
    calls,
    p50us: at(50),
    p99us: at(99),
    meanus: samples.reduce((sum, value) => sum + value, 0) / calls,
    allowed: last.allowed,
    message: last.message,
  }
}
