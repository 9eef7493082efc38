import { describe, expect, it } from "vitest"
import { newId, randomBase62 } from "../../src/util/ids.ts"

describe("ids", () => {
  it("newId is the prefix, an underscore and 17 base62 characters, never repeated", () => {
    const ids = Array.from({ length: 20_000 }, () => newId("res"))
    for (const id of ids) expect(id).toMatch(/^res_[0-9A-Za-z]{17}$/)
    expect(new Set(ids).size).toBe(ids.length)
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
