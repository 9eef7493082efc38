/**
 * What a `store: true` turn stores, decided before the model is called and saved when its last
 * event arrives.
 *
 * Before the call (`planStore`): the input items this response will list (earlier turns first),
 * the items whose ids were minted here, and a size check — a response is stored whole with its
 * conversation, and a conversation too large for the store is a 413 naming `store` before anything
 * is spent, never an answer that is charged and then cannot be kept. Content needs no check:
 * stored JSON is text, which holds any string (NUL and unpaired surrogates included).
 *
 * At the end (`storeOnStop`): the exact body, the conversation with the answer, the replay record
 * and the referable items are saved before the terminal event is encoded, so the client never sees
 * the end of a response that is not stored yet.
 */
import { type Array as Arr, Effect, type Pull, Stream } from "effect"
import type { SqlError } from "effect/sql"
import type { EncodeContext } from "../dialects/dialect.ts"
import { outputItem } from "../dialects/responses/envelope.ts"
import { isItemReference, type ItemResolver, noStoredItems } from "../dialects/responses/input.ts"
import { listInputItems } from "../dialects/responses/input-items.ts"
import { responsesDialect, type ResponsesEcho } from "../dialects/responses/index.ts"
import type { ReplayRecord } from "../dialects/responses/replay.ts"
import { InvalidRequest, PayloadTooLarge, ServiceUnavailable } from "../errors.ts"
import type { BackendError } from "../backends/backend.ts"
import type { QueueTimeout } from "../runtime/capacity-queue-types.ts"
import type { CanonicalEvent } from "../model/events.ts"
import { EventRecord } from "./event-record.ts"
import type { NewStoredResponse, StoredConversation } from "./responses-repo.ts"
import { type Transcript, withAnswer } from "./transcript.ts"
import { jsonBytesInSlices, jsonTextsInSlices } from "../util/sliced-stringify.ts"
import { runInSlices } from "../util/slices.ts"
import { serverMessage, storageFailureKind } from "../storage/sql-failures.ts"

/** How a call can fail (as `http/chat-answer.ts` names it). */
type CallFailure = BackendError | QueueTimeout

/** How storing the answer can fail (see `saveFailure`). */
type StoreFailure = ServiceUnavailable | InvalidRequest | PayloadTooLarge

/**
 * The most a stored conversation (canonical transcript plus listed input items) may hold. A
 * stored row is read back whole, and the SQL client reads at most 16 MiB per row; the answer,
 * its body and its replay record need the rest.
 */
const STORE_LIMIT_BYTES = 8 * 1024 * 1024

export interface StorePlan {
  readonly conversation: Transcript
  /**
   * What the response's input items are listed from, again when it is stored (`listed`): the
   * listing made for the size check is dropped, so an open stream does not hold a typed copy of
   * its input beside the input (the ids it mints are minted then; nobody has seen them before).
   */
  readonly previous: StoredConversation | undefined
  readonly input: string | ReadonlyArray<unknown>
  readonly resolve: ItemResolver
}

/**
 * Every input item the response lists (the previous response's, its output, this input), and
 * this input's items with minted ids, which become referable.
 */
const listed = (previous: StoredConversation | undefined, input: string | ReadonlyArray<unknown>, resolve: ItemResolver) => {
  const own = listInputItems(input, resolve)
  return { inputItems: previous === undefined ? own.items : [...previous.inputItems, ...previous.output, ...own.items], minted: own.minted }
}

/** Values walked between two readings of the clock (`runInSlices`). */
const VALUES_PER_STEP = 4_096

/**
 * The UTF-16 units of every string in `value`: a lower bound of its JSON's UTF-8 size (a unit is
 * at least one byte; quotes and escapes only add), found without serializing it. A generator for
 * `runInSlices`: a conversation of thousands of items took 25 ms in one turn on a slow VM.
 */
function* stringUnits(value: unknown): Generator<void, number> {
  const stack: Array<unknown> = [value]
  let units = 0
  let walked = 0
  while (stack.length > 0) {
    const current = stack.pop()
    if (typeof current === "string") units += current.length
    else if (Array.isArray(current)) for (let i = 0; i < current.length; i++) stack.push(current[i])
    else if (typeof current === "object" && current !== null) for (const key in current) stack.push((current as Record<string, unknown>)[key])
    if (++walked % VALUES_PER_STEP === 0) yield
  }
  return units
}

const tooLargeToStore = (size: string) =>
  Effect.fail(new PayloadTooLarge({
    limitBytes: STORE_LIMIT_BYTES,
    param: "store",
    message: `This conversation is too large to store: ${size} bytes with the earlier turns, above the limit of ` +
      `${STORE_LIMIT_BYTES} bytes for a stored response. Send it with store: false (and the whole transcript), or start a new chain`
  }))

// A generator made once (`Effect.fnUntraced`), not per call: see `answer` in http/chat-answer.ts.
export const planStore = Effect.fnUntraced(function*(
  previous: StoredConversation | undefined,
  conversation: Transcript,
  input: string | ReadonlyArray<unknown>,
  resolve: ItemResolver
): Effect.fn.Return<StorePlan, PayloadTooLarge> {
  const { inputItems } = listed(previous, input, resolve)
  // A 32 MiB input would be serialized twice (~64 MiB, holding the event loop) only to be
  // refused: its characters alone already tell.
  const atLeast = (yield* runInSlices(stringUnits(inputItems))) + (yield* runInSlices(stringUnits(conversation)))
  if (atLeast > STORE_LIMIT_BYTES) return yield* tooLargeToStore(`at least ${atLeast}`)
  // Up to 8 MiB of JSON: measured in slices (`JSON.stringify` of it held the event loop ~55 ms
  // on a slow VM); its text is made when it is stored.
  const size = (yield* jsonBytesInSlices(inputItems)) + (yield* jsonBytesInSlices(conversation))
  if (size > STORE_LIMIT_BYTES) return yield* tooLargeToStore(String(size))
  // The resolver only where the input refers to stored items: it holds the route's scope (the
  // items looked up, an empty Map otherwise) for as long as the stream is open.
  const refers = typeof input !== "string" && input.some(isItemReference)
  return { conversation, previous, input, resolve: refers ? resolve : noStoredItems }
})

/**
 * A save that fails is never silent. What it means is `storageFailureKind`'s rule, as on every
 * other route: a value the store refuses (class 22) is a 400 naming `store` and one too large for
 * it (class 54) a 413 naming `store` — the request's own, which SDKs do not retry; anything else
 * (a lost connection, a full disk) is the store's outage, a retryable 503 (or the stream's error
 * event), reported as the storage's failure, never as the model's.
 */
const saveFailure = (error: SqlError.SqlError): StoreFailure => {
  switch (storageFailureKind(error)) {
    case "refused-value":
      return new InvalidRequest({ message: `The response could not be stored (${serverMessage(error) ?? error.message}); send it with store: false`, param: "store" })
    case "too-large":
      return new PayloadTooLarge({
        limitBytes: STORE_LIMIT_BYTES,
        param: "store",
        message: `The response is too large to store (${serverMessage(error) ?? error.message}); send it with store: false`
      })
    case "outage":
      return new ServiceUnavailable({ status: 503, message: "The response could not be stored: storage is unavailable", retryAfterSeconds: 1 })
  }
}

export const storeOnStop = (
  events: Stream.Stream<CanonicalEvent, CallFailure>,
  context: EncodeContext<ResponsesEcho>,
  keyId: string,
  plan: StorePlan,
  save: (response: NewStoredResponse) => Effect.Effect<void, SqlError.SqlError>
): Stream.Stream<CanonicalEvent, CallFailure | StoreFailure> => {
  // Held for as long as the stream is open: compact, rebuilt once at its end (see there).
  const record = new EventRecord(context.answer)
  // The recorded events rebuilt and the answer they make, stored. The transcript holds the whole
  // conversation (up to 8 MiB): the documents' JSON is made in slices where they are stored
  // (`ResponsesRepo.save`), the items' here.
  const store = () =>
    runInSlices(record.rebuild()).pipe(
      Effect.flatMap(({ events: recorded, response }) => {
        const replay: ReplayRecord = { createdAt: context.createdAt, echo: context.echo, events: recorded }
        const outputs = response.content.map((block, index) => outputItem(block, context.id, index))
        const { inputItems, minted } = listed(plan.previous, plan.input, plan.resolve)
        const items = [...minted, ...outputs]
        return Effect.map(jsonTextsInSlices(items), (itemJsons) => ({ response, replay, inputItems, items, itemJsons }))
      }),
      Effect.flatMap(({ response, replay, inputItems, items, itemJsons }) =>
        save({
          id: context.id,
          keyId,
          model: context.model,
          // The same function encodes the body a non-streaming client gets and the terminal
          // event's `response`, so its JSON is exactly the bytes the client sees.
          body: responsesDialect.encodeResponse(response, context),
          transcript: withAnswer(plan.conversation, response),
          replay,
          inputItems,
          items: items.map((item, i) => ({ id: item.id as string, item: itemJsons[i]! }))
        })
      ),
      Effect.catchTag("SqlError", (error) =>
        Effect.logError("could not store a response", error).pipe(Effect.andThen(Effect.fail(saveFailure(error)))))
    )
  // A chunk at a time (an upstream read's events), not an Effect and a pull per event (as
  // `Stream.mapEffect`, which also sends each event alone). The chunk that ends the stream is sent
  // in two: its events before `message_stop` at once, the rest once the answer is stored.
  return Stream.transformPull(events, (pull) =>
    Effect.sync(() => {
      /** The end of the last chunk, from its `message_stop` on: sent once the answer is stored. */
      let held: Arr.NonEmptyReadonlyArray<CanonicalEvent> | undefined
      const next: Pull.Pull<Arr.NonEmptyReadonlyArray<CanonicalEvent>, CallFailure | StoreFailure> = Effect.suspend(() => {
        if (held !== undefined) {
          const end = held
          held = undefined
          return Effect.as(store(), end)
        }
        return Effect.flatMap(pull, (chunk) => {
          // `message_stop` is last (the event contract); whatever might follow it is not recorded.
          const stop = chunk.findIndex((event) => event.type === "message_stop")
          const recorded = stop === -1 ? chunk.length : stop + 1
          for (let i = 0; i < recorded; i++) record.add(chunk[i]!)
          if (stop === -1) return Effect.succeed(chunk)
          if (stop === 0) return Effect.as(store(), chunk)
          held = chunk.slice(stop) as unknown as Arr.NonEmptyReadonlyArray<CanonicalEvent>
          return Effect.succeed(chunk.slice(0, stop) as unknown as Arr.NonEmptyReadonlyArray<CanonicalEvent>)
        })
      })
      return next
    }))
}
