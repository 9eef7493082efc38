import { describe, expect, it } from "vitest"
import { newId, randomBase62, timeOrderedBase62 } from "../../src/util/ids.ts"

describe("ids", () => {
  it("newId is the prefix, an underscore and 17 base62 characters, never repeated", () => {
    const ids = Array.from({ length: 20_000 }, () => newId("res"))
    for (const id of ids) expect(id).toMatch(/^res_[0-9A-Za-z]{17}$/)
    expect(new Set(ids).size).toBe(ids.length)
  })

  it("newId leads with the time of minting: ids minted later sort after, by the millisecond", async () => {
    const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    const timeOf = (id: string) => [...id.slice(id.indexOf("_") + 1, id.indexOf("_") + 8)].reduce((ms, c) => ms * 62 + BASE62.indexOf(c), 0)
    const before = Date.now()
    const first = newId("call")
    const after = Date.now()
    expect(timeOf(first)).toBeGreaterThanOrEqual(before)
    expect(timeOf(first)).toBeLessThanOrEqual(after)
    const minted: Array<string> = [first]
    for (let i = 0; i < 5; i++) {
      await new Promise((resolve) => setTimeout(resolve, 2))
      minted.push(newId("call"))
    }
    // Plain string order (what a C-collated index and JavaScript's sort use) is minting order.
    expect([...minted].sort()).toEqual(minted)
    // The rest stays random: ids minted in the same millisecond differ.
    const burst = Array.from({ length: 1_000 }, () => newId("call"))
    expect(new Set(burst).size).toBe(burst.length)
    const response = timeOrderedBase62(24)
    expect(response).toMatch(/^[0-9A-Za-z]{24}$/)
    expect(timeOf(`x_${response}`)).toBeGreaterThanOrEqual(after)
  })

  it("randomBase62 carries the asked random bytes, every character of the alphabet about as often", () => {
    expect(randomBase62(12)).toMatch(/^[0-9A-Za-z]{17}$/)
    expect(randomBase62(18)).toMatch(/^[0-9A-Za-z]{25}$/)
    const counts = new Map<string, number>()
    for (let i = 0; i < 2_000; i++) for (const c of randomBase62(32)) counts.set(c, (counts.get(c) ?? 0) + 1)
    expect(counts.size).toBe(62)
    // 86,000 characters: ~1,387 each; a biased draw (e.g. `byte % 62` without rejection) skews some by ~25%.
    for (const n of counts.values()) expect(Math.abs(n - 86_000 / 62)).toBeLessThan(200)
  })
})
