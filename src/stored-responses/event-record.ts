/**
 * A stream's canonical events kept compactly while it is open, for a stored response (`store`,
 * OpenAI's default), whose replay record is every event and whose body is the answer they add up
 * to. Kept as event objects, a Responses stream at 300 chunks held 51 KiB against 30 without
 * `store` (`bench/stream-memory.ts --responses --store`): each delta an object of its own (~60
 * bytes) beside its few characters, and the answer's text a second time in a response builder.
 *
 * Here a delta costs its characters and one or two bytes:
 * - every delta's text goes into one `TextPieces`, in order (close to a byte a character);
 * - its length goes into a second `TextPieces` as one character (two from 32,768 characters on),
 *   so lengths below 256 keep that text one byte a character: ~1 byte a delta (a growing
 *   `Uint8Array` of LEB128 lengths held ~2.4 bytes a delta: spare capacity and its ArrayBuffer);
 * - consecutive deltas of one kind in one block are one run entry (kind, block, count);
 * - every other event (starts, stops) is kept as it is: a handful per block.
 * The events are rebuilt once, at the end, with the same text in the same pieces, and the answer is
 * collected from them then — in slices, as every pass over a long answer is (`util/slices.ts`).
 */
import { type CanonicalEvent, type CanonicalResponse, makeResponseBuilder } from "../model/events.ts"
import { pausesAt, type Sliced } from "../util/slices.ts"
import { TextPieces } from "../util/text-pieces.ts"

type DeltaEvent = Extract<CanonicalEvent, { type: "text_delta" | "thinking_delta" | "signature_delta" | "tool_input_delta" }>
type DeltaType = DeltaEvent["type"]

/** Consecutive deltas of one kind in one block. */
class DeltaRun {
  readonly type: DeltaType
  readonly index: number
  count = 1
  constructor(type: DeltaType, index: number) {
    this.type = type
    this.index = index
  }
}

/** A delta's text, or undefined for an event that is not a delta. */
const deltaText = (event: CanonicalEvent): string | undefined => {
  switch (event.type) {
    case "text_delta":
      return event.text
    case "thinking_delta":
      return event.thinking
    case "signature_delta":
      return event.signature
    case "tool_input_delta":
      return event.partialJson
    default:
      return undefined
  }
}

const deltaEvent = (type: DeltaType, index: number, text: string): DeltaEvent => {
  switch (type) {
    case "text_delta":
      return { type, index, text }
    case "thinking_delta":
      return { type, index, thinking: text }
    case "signature_delta":
      return { type, index, signature: text }
    case "tool_input_delta":
      return { type, index, partialJson: text }
  }
}

/** Lengths from here on take two characters. */
const LONG = 0x8000

/**
 * A length as characters: one below `LONG` (a cached one-character string below 256, so nothing
 * is allocated), else two, `LONG + ⌊length / LONG⌋` and `length mod LONG` (a delta is far shorter
 * than 2^30 characters: the SSE reader's line limit is 16 Mi).
 */
const lengthChars = (length: number): string =>
  length < LONG ? String.fromCharCode(length) : String.fromCharCode(LONG + Math.floor(length / LONG), length % LONG)

/** What a stream's events add up to, rebuilt at its end. */
export interface RecordedStream {
  readonly events: ReadonlyArray<CanonicalEvent>
  readonly response: CanonicalResponse
}

export class EventRecord {
  readonly #entries: Array<CanonicalEvent | DeltaRun> = []
  readonly #text = new TextPieces()
  /** Every delta's length in characters, in order: see `lengthChars`. */
  readonly #lengths = new TextPieces()

  add(event: CanonicalEvent): void {
    const text = deltaText(event)
    if (text === undefined) {
      this.#entries.push(event)
      return
    }
    const { type, index } = event as DeltaEvent
    const last = this.#entries[this.#entries.length - 1]
    if (last instanceof DeltaRun && last.type === type && last.index === index) last.count++
    else this.#entries.push(new DeltaRun(type, index))
    this.#text.add(text)
    this.#lengths.add(lengthChars(text.length))
  }

  /** The events as they were added (equal objects, the same texts), and the answer they make. */
  *rebuild(): Sliced<RecordedStream> {
    const text = this.#text.text()
    const lengths = this.#lengths.text()
    let read = 0
    let at = 0
    const nextLength = () => {
      const first = lengths.charCodeAt(read++)
      return first < LONG ? first : (first - LONG) * LONG + lengths.charCodeAt(read++)
    }
    const events: Array<CanonicalEvent> = []
    const builder = makeResponseBuilder()
    for (const entry of this.#entries) {
      if (!(entry instanceof DeltaRun)) {
        events.push(entry)
        builder.add(entry)
        continue
      }
      for (let i = 0; i < entry.count; i++) {
        const length = nextLength()
        const event = deltaEvent(entry.type, entry.index, text.slice(at, at + length))
        at += length
        events.push(event)
        builder.add(event)
        if (pausesAt(events.length)) yield
      }
    }
    return { events, response: builder.finish() }
  }
}
