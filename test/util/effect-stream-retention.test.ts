/**
 * Streams built per request must not outlive young-generation collections (patches/effect+4.1.0.patch).
 *
 * Effect 4.1.0 built every Channel with a function literal assigned to a property
 * (`self.transform = (upstream, scope) => …`), and V8 allocates such a literal straight into the old
 * generation (it takes it for a method). That closure kept what the channel captured — for a stream
 * built per request, the whole request — alive through every scavenge until the next full GC: at
 * 200 streamed answers/s, ~7 MB promoted per scavenge and 30–50 ms pauses. The patch hands the
 * closure in as an argument. This checks it in a fresh process, with V8's test natives: the
 * channel's closure is young, and 4,000 dropped streams holding 8 KB each leave the old generation
 * where it was after two scavenges. Unpatched: the closure is old, and the old generation grows ~18 MiB.
 */
import { spawnSync } from "node:child_process"
import { describe, expect, it } from "vitest"

const probe = `
import { Channel, Stream } from "effect"
import { getHeapSpaceStatistics } from "node:v8"
const oldUsed = () => getHeapSpaceStatistics().find((s) => s.space_name === "old_space").space_used_size
const channel = Channel.fromTransform((upstream) => upstream)
const closureYoung = %InYoungGeneration(channel.transform)
gc(); gc()
const before = oldUsed()
for (let i = 0; i < 2000; i++) {
  const captured = new Array(1000).fill(i)
  Stream.map(Stream.empty, () => captured.length)
  Stream.fromIterable([captured]).pipe(Stream.map((x) => x))
}
gc({ type: "minor" }); gc({ type: "minor" })
console.log(JSON.stringify({ closureYoung, grownMiB: (oldUsed() - before) / 1048576 }))
`

describe("Effect streams built per request", () => {
  it("are collected by young-generation GCs, not promoted with what they capture", () => {
    const run = spawnSync(process.execPath, ["--allow-natives-syntax", "--expose-gc", "--input-type=module", "-e", probe], {
      cwd: new URL("../..", import.meta.url),
      encoding: "utf8"
    })
    expect(run.stderr).toBe("")
    const { closureYoung, grownMiB } = JSON.parse(run.stdout) as { closureYoung: boolean; grownMiB: number }
    expect(closureYoung).toBe(true)
    expect(grownMiB).toBeLessThan(3)
  })
})
