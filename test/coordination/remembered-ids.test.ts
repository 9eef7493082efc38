/**
 * The in-process store's memory of finished ids (`coordination/remembered-ids.ts`) against the
 * plainest model of it: a Map of id → (value, expiry). Small windows (1–8 ids at least, room for
 * 1–4 at first) make every run start windows, grow their indexes and drop them all the time, while
 * ids are looked up, added, forgotten and added again.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { makeRememberedIds } from "../../src/coordination/remembered-ids.ts"

type Step =
  | { readonly kind: "add"; readonly value: number; readonly again: boolean; readonly advanceMs: number }
  | { readonly kind: "get"; readonly pick: number; readonly advanceMs: number }
  | { readonly kind: "expire"; readonly advanceMs: number }

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant("add" as const), value: fc.integer({ min: -1, max: 1_000_000 }), again: fc.boolean(), advanceMs: fc.integer({ min: 0, max: 5 }) }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("get" as const), pick: fc.nat(), advanceMs: fc.integer({ min: 0, max: 5 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("expire" as const), advanceMs: fc.integer({ min: 0, max: 60 }) }) }
)

describe("remembered ids", () => {
  it("answers every look-up as a Map with expiry does, across windows, their growth and expiries", () => {
    fc.assert(
      // Memory short enough that ids expire within a few windows.
      fc.property(fc.array(step, { minLength: 1, maxLength: 600 }), fc.integer({ min: 1, max: 8 }), fc.integer({ min: 1, max: 4 }), fc.integer({ min: 5, max: 100 }), (steps, windowIds, firstCapacity, MEMORY_MS) => {
        const remembered = makeRememberedIds({ windowIds, firstCapacity })
        const model = new Map<string, { value: number; expiresAt: number }>()
        const everAdded: Array<string> = []
        let now = 0
        let serial = 0
        const forget = () => {
          for (const [id, entry] of model) if (entry.expiresAt <= now) model.delete(id)
        }
        for (const s of steps) {
          now += s.advanceMs
          switch (s.kind) {
            case "add": {
              // A forgotten id again (it may still be in its window, behind the expiry cursor), or a
              // new one as the gateway mints them (`newId`: random characters last), or a run-step charge id.
              remembered.expire(now)
              forget()
              const forgotten = s.again ? everAdded.find((id) => !model.has(id)) : undefined
              const id = forgotten ?? (serial % 7 === 0 ? `run_${serial}/node_${serial % 13}/${serial % 3}` : `res_${(serial * 2_654_435_761 % 2 ** 32).toString(36)}`)
              if (forgotten === undefined) {
                serial++
                everAdded.push(id)
              }
              remembered.add(id, s.value, now + MEMORY_MS)
              model.set(id, { value: s.value, expiresAt: now + MEMORY_MS })
              break
            }
            case "get": {
              // An id added before (remembered or forgotten by now), or one never added.
              const id = everAdded.length > 0 && s.pick % 4 !== 0 ? everAdded[s.pick % everAdded.length]! : `never_${s.pick}`
              remembered.expire(now)
              forget()
              expect(remembered.get(id)).toBe(model.get(id)?.value)
              break
            }
            case "expire":
              remembered.expire(now)
              forget()
              expect(remembered.size).toBe(model.size)
          }
        }
        remembered.expire(now)
        forget()
        expect(remembered.size).toBe(model.size)
        for (const id of everAdded) expect(remembered.get(id)).toBe(model.get(id)?.value)
      }),
      { numRuns: 300 }
    )
  })

  it("keeps 240,000 ids over many windows, and forgets each when its time is up", () => {
    const remembered = makeRememberedIds()
    const N = 240_000
    for (let i = 0; i < N; i++) remembered.add(`req_${i.toString(36)}x${(i * 7_919).toString(36)}`, i % 1_000, i)
    expect(remembered.size).toBe(N)
    // Each id answers its own number, and none of as many ids of the same shape never added is
    // taken for one of them (ids are kept as fingerprints: a narrow one would collide here).
    let wrong = 0
    for (let i = 0; i < N; i++) {
      if (remembered.get(`req_${i.toString(36)}x${(i * 7_919).toString(36)}`) !== i % 1_000) wrong++
      if (remembered.get(`req_${i.toString(36)}y${(i * 7_919).toString(36)}`) !== undefined) wrong++
    }
    expect(wrong).toBe(0)
    expect(remembered.get("req_absent")).toBeUndefined()
    remembered.expire(N / 2 - 1) // ids 0 … N/2 − 1 expire
    expect(remembered.size).toBe(N / 2)
    expect(remembered.get(`req_${(N / 2 - 1).toString(36)}x${((N / 2 - 1) * 7_919).toString(36)}`)).toBeUndefined()
    expect(remembered.get(`req_${(N / 2).toString(36)}x${((N / 2) * 7_919).toString(36)}`)).toBe((N / 2) % 1_000)
  })
})
