/** How rows are cut into insert statements (a batch's requests, a stored response's items): at most 250 each, and about 1 MiB of text parameters. */
import { describe, expect, it } from "vitest"
import { insertGroups } from "../../src/storage/insert-groups.ts"

const rows = (sizes: ReadonlyArray<number>) => sizes.map((size) => ({ params: "x".repeat(size) }))
const groups = (sizes: ReadonlyArray<number>) => [...insertGroups(rows(sizes), (row) => row.params.length)]

describe("insertGroups", () => {
  it("takes 250 small rows a statement", () => {
    expect(groups(Array.from({ length: 600 }, () => 10))).toEqual([[0, 250], [250, 500], [500, 600]])
  })

  it("stops a statement once 1 Mi characters came, and always takes one", () => {
    const MiB = 1024 * 1024
    expect(groups([MiB / 2, MiB / 2, 10, 3 * MiB, 10, 10])).toEqual([[0, 2], [2, 4], [4, 6]])
    expect(groups([4 * MiB])).toEqual([[0, 1]])
    expect(groups([])).toEqual([])
  })
})
