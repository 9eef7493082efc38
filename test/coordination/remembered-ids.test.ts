/**
 * The in-process store's memory of finished ids (`coordination/remembered-ids.ts`) against the
 * plainest model of it: a Map of id → (value, expiry). Small maps (1–16 ids each) make every run
 * split maps many times over, so the linear hashing's addressing is exercised across rounds; moving
 * 1–3 ids per add keeps splits under way while ids are looked up, added and forgotten; chunks of 1–8
 * ids make the arrival-ordered queue drop and start chunks all the time.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { makeRememberedIds } from "../../src/coordination/remembered-ids.ts"

type Step =
  | { readonly kind: "add"; readonly value: number; readonly advanceMs: number }
  | { readonly kind: "get"; readonly pick: number; readonly advanceMs: number }
  | { readonly kind: "expire"; readonly advanceMs: number }

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant("add" as const), value: fc.integer({ min: -1, max: 1_000_000 }), advanceMs: fc.integer({ min: 0, max: 5 }) }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("get" as const), pick: fc.nat(), advanceMs: fc.integer({ min: 0, max: 5 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("expire" as const), advanceMs: fc.integer({ min: 0, max: 60 }) }) }
)

describe("remembered ids", () => {
  it("answers every look-up as a Map with expiry does, across splits and expiries", () => {
    fc.assert(
      // Memory short enough that ids expire while the split of their map is under way.
      fc.property(fc.array(step, { minLength: 1, maxLength: 600 }), fc.integer({ min: 1, max: 16 }), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 8 }), fc.integer({ min: 5, max: 100 }), (steps, bucketIds, movesPerAdd, chunkIds, MEMORY_MS) => {
        const remembered = makeRememberedIds({ bucketIds, movesPerAdd, chunkIds })
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
              // Ids as the gateway mints them (`newId`: random characters last), and run-step charge ids.
              const id = serial % 7 === 0 ? `run_${serial}/node_${serial % 13}/${serial % 3}` : `res_${(serial * 2_654_435_761 % 2 ** 32).toString(36)}`
              serial++
              remembered.add(id, s.value, now + MEMORY_MS)
              model.set(id, { value: s.value, expiresAt: now + MEMORY_MS })
              everAdded.push(id)
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

  it("keeps 240,000 ids over many maps, and forgets each when its time is up", () => {
    const remembered = makeRememberedIds()
    const N = 240_000
    for (let i = 0; i < N; i++) remembered.add(`req_${i.toString(36)}x${(i * 7_919).toString(36)}`, i % 1_000, i)
    expect(remembered.size).toBe(N)
    for (const i of [0, 1, 4_095, 4_096, 123_456, N - 1]) expect(remembered.get(`req_${i.toString(36)}x${(i * 7_919).toString(36)}`)).toBe(i % 1_000)
    expect(remembered.get("req_absent")).toBeUndefined()
    remembered.expire(N / 2 - 1) // ids 0 … N/2 − 1 expire
    expect(remembered.size).toBe(N / 2)
    expect(remembered.get(`req_${(N / 2 - 1).toString(36)}x${((N / 2 - 1) * 7_919).toString(36)}`)).toBeUndefined()
    expect(remembered.get(`req_${(N / 2).toString(36)}x${((N / 2) * 7_919).toString(36)}`)).toBe((N / 2) % 1_000)
  })
})
