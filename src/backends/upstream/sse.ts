/**
 * Server-Sent Events read incrementally, by the WHATWG rules the official SDKs follow: text is fed
 * as it arrives, cut anywhere; lines end in LF, CRLF or CR; `:` lines are comments; several `data:`
 * lines join with LF; one space after a field's colon is dropped; `id`, `retry` and unknown fields
 * are skipped. A blank line completes an event; the end of the body completes one left open.
 *
 * Both backends read their upstream through this one reader and differ only in what they keep of
 * an event: the OpenAI-compatible backend its `data` (`ssePayloads`), the Anthropic one its name and
 * data (`sseEvents`).
 *
 * It runs once per streamed token and an open stream holds one, so it is a class with its state in
 * fields, finds line ends with `indexOf`, reads fields in place, keeps a single data line as a
 * string and appends to the caller's array. Each read is searched once: an unfinished line is kept
 * unsearched and completed when its end arrives, so a line sent in many reads costs its length, not its
 * length times the reads (a hostile upstream's one endless line must not hold the event loop), and
 * it may not grow past `MAX_SSE_LINE_CHARS`. Nor may an event's data, its lines joined, nor its
 * count of data lines past `MAX_SSE_DATA_LINES`: an upstream that sends `data:` lines without
 * ever a blank line would otherwise be kept in memory until the process ran out of it.
 */

/** An event's name (`undefined` when it had no `event:` field) and data (LF-joined `data:` lines). */
export interface SseEvent {
  readonly event: string | undefined
  readonly data: string
}

/**
 * The longest line accepted, in UTF-16 units: far above any event a model streams (a token, a
 * tool call's arguments, a base64 image), and small enough that completing it — one copy, then the
 * backend's `JSON.parse` — holds the event loop for milliseconds, not a second.
 */
export const MAX_SSE_LINE_CHARS = 16 * 1024 * 1024

/**
 * The most `data:` lines one event may have. Models send one; the format allows several (joined
 * with LF), but a kept line costs a slot and a string beside its characters.
 */
export const MAX_SSE_DATA_LINES = 65_536

/**
 * Thrown when one line, or one event's data, outgrows `MAX_SSE_LINE_CHARS` (or its data lines
 * `MAX_SSE_DATA_LINES`); the backends report it as the upstream's failure.
 */
export class SseLineTooLong extends Error {
  constructor(what: "line" | "event" = "line") {
    super(
      what === "line"
        ? `the upstream sent a Server-Sent Events line longer than ${MAX_SSE_LINE_CHARS} characters`
        : `the upstream sent a Server-Sent Events event with more than ${MAX_SSE_LINE_CHARS} characters or ${MAX_SSE_DATA_LINES} lines of data`
    )
  }
}

/** What a reader keeps of a completed event: it appends to `out`, or skips the event. */
type Emit<Out> = (event: string | undefined, data: string | undefined, out: Array<Out>) => void

const LF = 10
const COLON = 58
const SPACE = 32

export class SseReader<Out> {
  readonly #emit: Emit<Out>
  // The unfinished line from earlier reads (most often none): joined with `+`, which V8 makes a
  // rope, not a copy; it is never searched, and flattened once, when its end arrives.
  #pending = ""
  // The last read ended in CR: an LF starting the next one is the same line end.
  #afterCR = false
  #event: string | undefined = undefined
  // One data line (every event a model streams) is kept as it is, with no array made.
  #data: string | Array<string> | undefined = undefined
  // The length of the event's data so far, its lines joined.
  #dataChars = 0

  constructor(emit: Emit<Out>) {
    this.#emit = emit
  }

  /** Feeds the next piece of text; appends the events it completed to `out` (by default a new array) and returns it. */
  feed(text: string, out: Array<Out> = []): Array<Out> {
    const n = text.length
    let start = 0
    if (this.#afterCR) {
      this.#afterCR = false
      if (n > 0 && text.charCodeAt(0) === LF) start = 1
    }
    let lf = text.indexOf("\n", start)
    let cr = text.indexOf("\r", start)
    while (lf !== -1 || cr !== -1) {
      let end: number
      let next: number
      if (cr !== -1 && (lf === -1 || cr < lf)) {
        end = cr
        if (cr + 1 === n) this.#afterCR = true
        next = text.charCodeAt(cr + 1) === LF ? cr + 2 : cr + 1
      } else {
        end = lf
        next = lf + 1
      }
      if (this.#pending === "") this.line(text, start, end, out)
      else {
        if (this.#pending.length + end - start > MAX_SSE_LINE_CHARS) throw new SseLineTooLong()
        const line = this.#pending + text.slice(start, end)
        this.#pending = ""
        this.line(line, 0, line.length, out)
      }
      start = next
      if (lf !== -1 && lf < start) lf = text.indexOf("\n", start)
      if (cr !== -1 && cr < start) cr = text.indexOf("\r", start)
    }
    if (start < n) {
      if (this.#pending.length + n - start > MAX_SSE_LINE_CHARS) throw new SseLineTooLong()
      this.#pending += start === 0 ? text : text.slice(start)
    }
    return out
  }

  /** The body ended: a last line without its line end, and an event without its blank line, complete. */
  end(out: Array<Out> = []): Array<Out> {
    const rest = this.#pending
    this.#pending = ""
    if (rest !== "") this.line(rest, 0, rest.length, out)
    this.#afterCR = false
    this.dispatch(out)
    return out
  }

  /** The line `text[start, end)`, without its line end. */
  private line(text: string, start: number, end: number, out: Array<Out>) {
    if (end === start) return this.dispatch(out)
    if (text.charCodeAt(start) === COLON) return // a comment
    let colon = text.indexOf(":", start)
    if (colon === -1 || colon > end) colon = end
    const fieldLength = colon - start
    let from = colon + 1
    if (from < end && text.charCodeAt(from) === SPACE) from++
    if (fieldLength === 4 && text.startsWith("data", start)) this.addData(from >= end ? "" : text.slice(from, end))
    else if (fieldLength === 5 && text.startsWith("event", start)) this.#event = from >= end ? "" : text.slice(from, end)
    // Any other field (id, retry, unknown) is skipped.
  }

  private addData(value: string) {
    const data = this.#data
    if (data === undefined) {
      this.#data = value
      this.#dataChars = value.length
      return
    }
    this.#dataChars += 1 + value.length
    if (this.#dataChars > MAX_SSE_LINE_CHARS || (typeof data !== "string" && data.length >= MAX_SSE_DATA_LINES)) {
      this.#data = undefined
      throw new SseLineTooLong("event")
    }
    if (typeof data === "string") this.#data = [data, value]
    else data.push(value)
  }

  private dispatch(out: Array<Out>) {
    const data = this.#data
    if (data !== undefined || this.#event !== undefined) {
      this.#emit(this.#event, data === undefined ? undefined : typeof data === "string" ? data : data.join("\n"), out)
    }
    this.#event = undefined
    this.#data = undefined
  }
}

const keepData: Emit<string> = (_event, data, out) => {
  if (data !== undefined) out.push(data)
}

const keepEvent: Emit<SseEvent> = (event, data, out) => {
  out.push({ event, data: data ?? "" })
}

/** A reader that keeps each event's data: what an OpenAI-compatible upstream means (an event with no data is skipped). */
export const ssePayloads = (): SseReader<string> => new SseReader(keepData)

/** A reader that keeps each event's name and data: what the Messages API means (a named event with no data has data ""). */
export const sseEvents = (): SseReader<SseEvent> => new SseReader(keepEvent)
