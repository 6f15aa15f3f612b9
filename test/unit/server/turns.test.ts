// Turns: an answer ready within the turn that read its request waits for that turn's end, and
// only for that: never for the next turn.

import t from 'tap'
import { Turns } from '../../../src/server/turns.ts'

const checkPhase = (): Promise<void> => new Promise((resolve) => { setImmediate(resolve) })

void t.test('an answer ready in its turn waits for the end of the turn, with every other of that turn', async (t) => {
  const turns = new Turns()
  const turn = turns.begin()
  t.equal(turns.begin(), turn, 'the same turn for every request read in it')
  const answered: string[] = []
  void turns.after(turn)?.then(() => answered.push('a'))
  void turns.after(turn)?.then(() => answered.push('b'))
  await Promise.resolve()
  await Promise.resolve()
  t.same(answered, [], 'not within the turn')
  await checkPhase()
  t.same(answered, ['a', 'b'], 'both at its end, in order')
  t.equal(turns.after(turn), undefined, 'once the turn has ended, an answer goes at once')
})

void t.test('an answer produced in the check phase, after the turn\'s end (the Lease\'s drain), is not held for the next turn', async (t) => {
  const turns = new Turns()
  const turn = turns.begin()
  // Queued after begin(), as the Lease's drain is: it runs after the turn's end.
  const late = await new Promise<Promise<void> | undefined>((resolve) => { setImmediate(() => { resolve(turns.after(turn)) }) })
  t.equal(late, undefined, 'answered at once')
})

void t.test('each turn has its own end', async (t) => {
  const turns = new Turns()
  const first = turns.begin()
  await checkPhase()
  const second = turns.begin()
  t.not(second, first, 'a new turn')
  let answered = false
  void turns.after(second)?.then(() => { answered = true })
  await Promise.resolve()
  t.notOk(answered, 'held until the second turn ends')
  await checkPhase()
  t.ok(answered, 'answered at its end')
})
