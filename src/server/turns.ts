// Answers written at the end of the event loop's turn in which their requests were read, all
// together, instead of each as soon as it is decided.
//
// A review that needs no reservation is decided within the callback that read it, and was answered
// there, between the reads of the turn. Under load that interleaving cost the webhook's main thread
// about 1.6 times the CPU a review (103 against 64 µs at 32 connections, measured in one rotation;
// docs/benchmarks.md, "Sixth pass"). Every function ran slower, not one: the client, sent answers
// one at a time, slept and was woken 8 times as often (0.36 against 0.045 times a review), and each
// wakeup costs both sides. Answers that wait for the Lease were already written together, by its
// drain (a setImmediate, src/cluster/reservations.ts). The wait is short: the turn's check phase
// follows its I/O callbacks, without waiting for more I/O (~10 µs a round trip with one connection).

/** Marks the ends of turns; `begin` when a request is read, `after` when its answer is ready. */
export class Turns {
  private turn = 0
  private scheduled = false
  private waiting: (() => void)[] = []

  /**
   * The current turn. Its end is marked by a setImmediate queued now, so before any queued later in
   * the turn (such as the Lease's drain): answers produced there find their turn already ended.
   */
  begin(): number {
    if (!this.scheduled) {
      this.scheduled = true
      setImmediate(this.end)
    }
    return this.turn
  }

  /** Undefined once turn `since` has ended; otherwise resolves when it ends. */
  after(since: number): Promise<void> | undefined {
    if (since !== this.turn) return undefined
    return new Promise((resolve) => { this.waiting.push(resolve) })
  }

  private readonly end = (): void => {
    this.turn++
    this.scheduled = false
    const waiting = this.waiting
    this.waiting = []
    for (const resolve of waiting) resolve()
  }
}
