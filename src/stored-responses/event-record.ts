/**
 * A stream's canonical events kept compactly while it is open, for a stored response (`store`,
 * OpenAI's default), whose replay record is every event and whose body is the answer they add up
 * to. Kept as event objects, a Responses stream at 300 chunks held 51 KiB against 30 without
 * `store` (`bench/stream-memory.ts --responses --store`): each delta an object of its own (~60
 * bytes) beside its few characters, and the answer's text a second time in a response builder.
 *
 * Here a delta costs one or two bytes, not its text: the text is the answer's, assembled once
 * for the whole call (`AnswerSoFar`: the call's own, `ModelCall.answer`, which has every event
 * before this record does; else one assembled here), and the record keeps only where each delta
 * ends within its block:
 * - its length goes into a `TextPieces` as one character (two from 32,768 characters on), so
 *   lengths below 256 keep that text one byte a character: ~1 byte a delta (a growing
 *   `Uint8Array` of LEB128 lengths held ~2.4 bytes a delta: spare capacity and its ArrayBuffer);
 * - consecutive deltas of one kind in one block are one run entry (kind, block, count);
 * - every other event (starts, stops), and a delta the answer does not keep (one that breaks the
 *   event contract: its block not started, or of another kind), is kept as it is: a handful per
 *   block. Which deltas the answer keeps is decided here from the events in this record's order
 *   (`blockTakes`), not by asking the answer, which may already hold later events.
 * The events are rebuilt once, at the end, each delta cut from its block's text at the same
 * boundaries — in slices, as every pass over a long answer is (`util/slices.ts`).
 */
import { type AnswerSoFar, type BlockStart, blockTakes, type CanonicalEvent, type CanonicalResponse, type DeltaEvent, type DeltaType, makeResponseBuilder, type ResponseBuilder } from "../model/events.ts"
import { withItemAt } from "../util/arrays.ts"
import { pausesAt, type Sliced } from "../util/slices.ts"
import { TextPieces } from "../util/text-pieces.ts"

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

/** Where the rebuild is in one block's deltas of one kind: the text they make, and how far it was cut. */
interface Cutting {
  readonly text: string
  at: number
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
  #entries: Array<CanonicalEvent | DeltaRun> = []
  /** The answer's texts, which the deltas are cut from. */
  readonly #answer: AnswerSoFar
  /** Fed here only when the call keeps no answer of its own. */
  readonly #own: ResponseBuilder | undefined
  /** Every delta's length in characters, in order: see `lengthChars`. */
  readonly #lengths = new TextPieces()
  /** Each started block's kind, by index (the first start of an index, as the answer keeps it). */
  #kinds: Array<BlockStart["type"]> = []

  /** `answer`: the call's answer, fed every event before this record is (else one is kept here). */
  constructor(answer?: AnswerSoFar) {
    if (answer === undefined) {
      const own = makeResponseBuilder()
      this.#own = own
      this.#answer = own
    } else {
      this.#own = undefined
      this.#answer = answer
    }
  }

  add(event: CanonicalEvent): void {
    this.#own?.add(event)
    const text = deltaText(event)
    const delta = event as DeltaEvent
    if (text === undefined || !blockTakes(this.#kinds[delta.index], delta.type)) {
      if (event.type === "block_start" && this.#kinds[event.index] === undefined) this.#kinds = withItemAt(this.#kinds, event.index, event.block.type)
      this.push(event)
      return
    }
    const { type, index } = delta
    const last = this.#entries[this.#entries.length - 1]
    if (last instanceof DeltaRun && last.type === type && last.index === index) last.count++
    else this.push(new DeltaRun(type, index))
    this.#lengths.add(lengthChars(text.length))
  }

  /** Exactly sized while short (an array grown by `push` keeps spare slots for as long as the stream is open). */
  private push(entry: CanonicalEvent | DeltaRun): void {
    this.#entries = withItemAt(this.#entries, this.#entries.length, entry)
  }

  /** The events as they were added (equal objects, the same texts), and the answer they make. */
  *rebuild(): Sliced<RecordedStream> {
    const lengths = this.#lengths.text()
    let read = 0
    const nextLength = () => {
      const first = lengths.charCodeAt(read++)
      return first < LONG ? first : (first - LONG) * LONG + lengths.charCodeAt(read++)
    }
    /** By block index and kind: a block has at most two kinds of delta (thinking and its signature). */
    const cutting = new Map<string, Cutting>()
    const events: Array<CanonicalEvent> = []
    for (const entry of this.#entries) {
      if (!(entry instanceof DeltaRun)) {
        events.push(entry)
        continue
      }
      const key = `${entry.index} ${entry.type}`
      let source = cutting.get(key)
      if (source === undefined) cutting.set(key, source = { text: this.#answer.deltas(entry.index, entry.type), at: 0 })
      for (let i = 0; i < entry.count; i++) {
        const length = nextLength()
        events.push(deltaEvent(entry.type, entry.index, source.text.slice(source.at, source.at + length)))
        source.at += length
        if (pausesAt(events.length)) yield
      }
    }
    return { events, response: this.#answer.finish() }
  }
}
