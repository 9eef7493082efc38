/**
 * The one Server-Sent Events reader both backends use (`src/backends/upstream/sse.ts`): line ends
 * cut between reads, lines sent in many reads, and the line-length limit. The field rules are
 * tested through each backend's reader (`openai-compatible/chunk-parser.test.ts`,
 * `anthropic/wire.test.ts`).
 */
import { describe, expect, it } from "vitest"
import { MAX_SSE_DATA_LINES, MAX_SSE_LINE_CHARS, type SseEvent, sseEvents, SseLineTooLong, ssePayloads } from "../../src/backends/upstream/sse.ts"

/** The reader's payloads for `reads`, fed one by one, and the end. */
const payloadsOf = (reads: ReadonlyArray<string>): Array<string> => {
  const reader = ssePayloads()
  const out: Array<string> = []
  for (const read of reads) reader.feed(read, out)
  return reader.end(out)
}

describe("SSE reader", () => {
  it("takes a CR that ends one read and an LF that starts the next as one line end", () => {
    // Read as two line ends, the CR and the LF would make a blank line: two events, "a" and "b".
    expect(payloadsOf(["data: a\r", "\ndata: b\r", "\n\r", "\n"])).toEqual(["a\nb"])
    // A lone CR is a line end of its own, even at the end of a read.
    expect(payloadsOf(["data: a\r", "data: b\r", "\r"])).toEqual(["a\nb"])
    expect(payloadsOf(["data: a\r", "\r", "data: b\n\n"])).toEqual(["a", "b"])
  })

  it("puts a line sent in many reads back together, whatever the cuts", () => {
    const big = JSON.stringify({ text: "é€😀 ".repeat(50_000) })
    const text = `event: big\ndata: ${big}\n\nevent: small\ndata: x\r\n\r\n`
    for (const size of [1_000, 4_096, 65_536, text.length]) {
      const reader = sseEvents()
      const events: Array<SseEvent> = []
      for (let at = 0; at < text.length; at += size) reader.feed(text.slice(at, at + size), events)
      reader.end(events)
      expect(events, `reads of ${size}`).toEqual([{ event: "big", data: big }, { event: "small", data: "x" }])
    }
  })

  it("refuses a line longer than the limit, after handing on the events completed before it", () => {
    const reader = ssePayloads()
    const out: Array<string> = []
    const piece = "x".repeat(1024 * 1024)
    reader.feed("data: first\n\ndata: ", out)
    let refused: unknown
    try {
      for (let sent = 0; sent <= MAX_SSE_LINE_CHARS; sent += piece.length) reader.feed(piece, out)
    } catch (error) {
      refused = error
    }
    expect(refused).toBeInstanceOf(SseLineTooLong)
    expect((refused as Error).message).toContain(String(MAX_SSE_LINE_CHARS))
    expect(out).toEqual(["first"])
  })

  it("refuses a line whose end arrives in the read that takes it past the limit", () => {
    const reader = ssePayloads()
    reader.feed("data:" + "w".repeat(MAX_SSE_LINE_CHARS - 10))
    expect(() => reader.feed("w".repeat(20) + "\n\n")).toThrow(SseLineTooLong)
  })

  it("refuses an event whose data lines, joined, outgrow the limit, after handing on the events before it", () => {
    const reader = ssePayloads()
    const out: Array<string> = []
    const line = `data: ${"z".repeat(1024 * 1024)}\n`
    reader.feed("data: first\n\n", out)
    // 1 MiB lines without the blank line that would end their event.
    let lines = 0
    expect(() => {
      for (; lines <= 16; lines++) reader.feed(line, out)
    }).toThrow(/event with more than/)
    expect(lines).toBe(15)
    expect(out).toEqual(["first"])
  })

  it("refuses an event of more data lines than MAX_SSE_DATA_LINES, and keeps one of exactly that many", () => {
    const lines = (n: number) => "data: x\n".repeat(n)
    const kept: Array<string> = []
    ssePayloads().feed(lines(MAX_SSE_DATA_LINES) + "\n", kept)
    expect(kept).toHaveLength(1)
    expect(kept[0]!.length).toBe(2 * MAX_SSE_DATA_LINES - 1)
    expect(() => ssePayloads().feed(lines(MAX_SSE_DATA_LINES + 1))).toThrow(SseLineTooLong)
    // Comments and other fields are skipped, not kept: any number of them is fine.
    expect(ssePayloads().feed(": ping\nid: 1\n".repeat(MAX_SSE_DATA_LINES * 2) + "data: y\n\n")).toEqual(["y"])
  })

  it("keeps a line of exactly the limit", () => {
    const reader = ssePayloads()
    const line = "data:" + "y".repeat(MAX_SSE_LINE_CHARS - 5)
    const out: Array<string> = []
    for (let at = 0; at < line.length; at += 8 * 1024 * 1024) reader.feed(line.slice(at, at + 8 * 1024 * 1024), out)
    reader.feed("\n\n", out)
    expect(out.map((data) => data.length)).toEqual([MAX_SSE_LINE_CHARS - 5])
  })
})
