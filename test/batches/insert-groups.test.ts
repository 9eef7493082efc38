/** How a batch's requests are cut into insert statements: at most 250 each, and about 1 MiB of params. */
import { describe, expect, it } from "vitest"
import { insertGroups } from "../../src/batches/batches-repo.ts"

const requests = (sizes: ReadonlyArray<number>) => sizes.map((size) => ({ params: "x".repeat(size) }))

describe("insertGroups", () => {
  it("takes 250 small requests a statement", () => {
    expect([...insertGroups(requests(Array.from({ length: 600 }, () => 10)))]).toEqual([[0, 250], [250, 500], [500, 600]])
  })

  it("stops a statement once 1 Mi characters of params came, and always takes one", () => {
    const MiB = 1024 * 1024
    expect([...insertGroups(requests([MiB / 2, MiB / 2, 10, 3 * MiB, 10, 10]))]).toEqual([[0, 2], [2, 4], [4, 6]])
    expect([...insertGroups(requests([4 * MiB]))]).toEqual([[0, 1]])
    expect([...insertGroups([])]).toEqual([])
  })
})
