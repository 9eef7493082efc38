/**
 * The queue machine's persistent FIFO: every version keeps its items after others push and pop
 * (branching, as the model tests step one state many ways), and a long-lived FIFO compacts its
 * consumed prefix without losing order.
 */
import { assert, describe, it } from "@effect/vitest"
import { emptyFifo, type Fifo, fifoItems, fifoSize, popFifo, pushFifo } from "../../machines/persistent-fifo.ts"

const pushAll = (fifo: Fifo<number>, items: ReadonlyArray<number>) => items.reduce(pushFifo, fifo)

describe("persistent FIFO", () => {
  it("keeps every version intact when branches push onto the same version", () => {
    const base = pushAll(emptyFifo<number>(), [1, 2, 3])
    const left = pushFifo(base, 4)
    const right = pushFifo(base, 5)
    const [head, rest] = popFifo(base)
    const restPushed = pushFifo(rest, 6)
    assert.deepStrictEqual(fifoItems(base), [1, 2, 3])
    assert.deepStrictEqual(fifoItems(left), [1, 2, 3, 4])
    assert.deepStrictEqual(fifoItems(right), [1, 2, 3, 5])
    assert.strictEqual(head, 1)
    assert.deepStrictEqual(fifoItems(rest), [2, 3])
    assert.deepStrictEqual(fifoItems(restPushed), [2, 3, 6])
    assert.deepStrictEqual(fifoItems(pushFifo(left, 7)), [1, 2, 3, 4, 7])
    assert.strictEqual(fifoSize(right), 4)
  })

  it("serves in order through many pops and pushes (compaction included), old versions unchanged", () => {
    let fifo = emptyFifo<number>()
    const kept: Array<[Fifo<number>, Array<number>]> = []
    const model: Array<number> = []
    for (let i = 0; i < 1_000; i++) {
      fifo = pushFifo(fifo, i)
      model.push(i)
      if (i % 3 !== 0) {
        const [head, rest] = popFifo(fifo)
        assert.strictEqual(head, model.shift())
        fifo = rest
      }
      if (i % 97 === 0) kept.push([fifo, [...model]])
    }
    assert.deepStrictEqual(fifoItems(fifo), model)
    // Compaction dropped the consumed prefix: the backing array holds about the live items.
    assert.isAtMost(fifo.items.length, 2 * fifoSize(fifo) + 64)
    for (const [version, items] of kept) assert.deepStrictEqual(fifoItems(version), items)
  })

  it("refuses to pop an empty FIFO", () => {
    assert.throws(() => popFifo(emptyFifo()), /empty/)
  })
})
