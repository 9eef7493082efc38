import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { countTextTokensExact, tokenPiecesExact } from "../../src/model/bpe.ts"
import { assistantMessage, userMessage } from "../../src/model/content.ts"
import { makeRequest } from "../../src/model/request.ts"
import { countText, stopTokenizerIfIdle, takeTokenPieces, type Text } from "../../src/model/tokenizer.ts"
import {
  countRequestTokens,
  DOCUMENT_TOKENS,
  IMAGE_TOKENS,
  MESSAGE_OVERHEAD_TOKENS,
  messagePart,
  countPartTokens,
  promptParts,
  REQUEST_OVERHEAD_TOKENS,
  requestTokenBound,
  textsTokenBound,
  TOOL_OVERHEAD_TOKENS
} from "../../src/model/tokens.ts"
import { loopTurnsDuring } from "../support/loop-turns.ts"

/** A prompt part's text as one string (a large value's JSON may be its pieces). */
const asString = (text: Text) => typeof text === "string" ? text : text.pieces.join("")

describe("exact counts (bpe.ts)", () => {
  it("counts with o200k_base", () => {
    // Known o200k_base counts (tiktoken agrees): "The quick brown fox." is The|quick|brown|fox|.
    assert.strictEqual(countTextTokensExact("The quick brown fox."), 5)
    assert.strictEqual(countTextTokensExact("Hello world"), 2)
    assert.strictEqual(countTextTokensExact("You are a helpful assistant."), 6)
    assert.strictEqual(countTextTokensExact(""), 0)
  })

  it("counts special-token strings as plain text instead of throwing", () => {
    assert.strictEqual(countTextTokensExact("<|endoftext|>"), 7)
  })

  it("splits a text into pieces that concatenate back and sum to its token count", () => {
    const text = "héllo 日本語 🎉 done, and the quick brown fox jumps over the lazy dog."
    const pieces = tokenPiecesExact(text)
    assert.strictEqual(pieces.map((p) => p.text).join(""), text)
    assert.strictEqual(pieces.reduce((sum, p) => sum + p.tokens, 0), countTextTokensExact(text))
    assert.isTrue(pieces.every((p) => !p.text.includes("\uFFFD")))
  })

  it("counts an unbroken run in time linear in its length", () => {
    // Unchunked, BPE on 256 KB of `A` took 16 s; in chunks it is well under a second.
    const started = performance.now()
    assert.strictEqual(countTextTokensExact("A".repeat(262_144)), 32_768)
    assert.isBelow(performance.now() - started, 5_000)
    assert.isAbove(countTextTokensExact("😀".repeat(50_000)), 0)
  })
})

describe("the tokenizer thread (tokenizer.ts)", () => {
  it.effect("counts as bpe.ts does", () =>
    Effect.gen(function*() {
      const text = "The quick brown fox. 日本語 🎉 ".repeat(50)
      assert.strictEqual(yield* countText(text), countTextTokensExact(text))
    }))

  it.effect("takes pieces up to a token limit and says when the text was cut", () =>
    Effect.gen(function*() {
      const text = "héllo 日本語 🎉 done, and the quick brown fox jumps over the lazy dog."
      const all = yield* takeTokenPieces(text, Infinity)
      assert.deepStrictEqual(all.pieces, tokenPiecesExact(text))
      assert.isFalse(all.cut)
      const first = yield* takeTokenPieces(text, 5)
      assert.isTrue(first.cut)
      assert.isAtMost(first.pieces.reduce((sum, p) => sum + p.tokens, 0), 5)
      assert.isTrue(text.startsWith(first.pieces.map((p) => p.text).join("")))
    }))

  it.effect("an idle thread stops when asked (a quiet server) and starts again at the next count; a busy one is kept", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* countText("Hello world"), 2)
      const busy = yield* Effect.forkChild(countText("😀".repeat(200_000)))
      yield* Effect.yieldNow
      assert.isFalse(stopTokenizerIfIdle(), "a job in flight keeps the thread")
      assert.isAbove(yield* Fiber.join(busy), 0)
      assert.isTrue(stopTokenizerIfIdle())
      assert.isFalse(stopTokenizerIfIdle(), "already stopped")
      assert.strictEqual(yield* countText("Hello world"), 2)
    }))

  it.effect("counts a text sent in parts (over 1 Mi characters) as the whole, two at once, and forgets a cancelled one", () =>
    Effect.gen(function*() {
      // Pairs and words straddle the parts' ends; the texts differ, so a mix-up would show.
      const long = ("word 日本語 🎉" + "x".repeat(1_000)).repeat(1_100)
      const other = "😀 and more words. ".repeat(60_000)
      const [a, b] = yield* Effect.all([countText(long), countText(other)], { concurrency: 2 })
      assert.strictEqual(a, countTextTokensExact(long))
      assert.strictEqual(b, countTextTokensExact(other))
      const cancelled = yield* Effect.forkChild(countText(long))
      yield* Effect.yieldNow
      yield* Fiber.interrupt(cancelled)
      assert.strictEqual(yield* countText(other), b)
      // A count whose parts are on their way keeps the thread, as a pending one does.
      const sending = yield* Effect.forkChild(countText(long))
      yield* Effect.yieldNow
      assert.isFalse(stopTokenizerIfIdle(), "parts in flight keep the thread")
      assert.strictEqual(yield* Fiber.join(sending), a)
    }))

  it.effect("answers a small count while a huge one runs", () =>
    Effect.gen(function*() {
      const fiber = yield* Effect.forkChild(countText("😀".repeat(400_000)))
      const started = performance.now()
      assert.strictEqual(yield* countText("Hello world"), 2)
      const waited = performance.now() - started
      assert.isAbove(yield* Fiber.join(fiber), 0)
      assert.isBelow(waited, 1_000)
    }))
})

describe("countRequestTokens", () => {
  const question = "What is the weather in Paris?" // 7 tokens

  it.effect("adds message and request overheads to the text", () =>
    Effect.gen(function*() {
      const request = makeRequest({ model: "svc-x", messages: [userMessage(question)] })
      assert.strictEqual(yield* countRequestTokens(request), REQUEST_OVERHEAD_TOKENS + MESSAGE_OVERHEAD_TOKENS + 7)
    }))

  it.effect("counts the system prompt as one more message", () =>
    Effect.gen(function*() {
      const request = makeRequest({
        model: "svc-x",
        system: [{ type: "text", text: "You are a helpful assistant." }],
        messages: [userMessage(question)]
      })
      assert.strictEqual(yield* countRequestTokens(request), REQUEST_OVERHEAD_TOKENS + 2 * MESSAGE_OVERHEAD_TOKENS + 6 + 7)
    }))

  it.effect("charges images and binary documents a flat cost, text documents by their text", () =>
    Effect.gen(function*() {
      const message = userMessage([
        { type: "image", source: { kind: "base64", mediaType: "image/png", data: "iVBORw0KGgo=".repeat(1000) } },
        { type: "document", source: { kind: "base64", mediaType: "application/pdf", data: "JVBERi0=" } },
        { type: "document", source: { kind: "text", mediaType: "text/plain", text: "Hello world" } }
      ])
      const [counted] = yield* countPartTokens([messagePart(message)])
      assert.strictEqual(counted, MESSAGE_OVERHEAD_TOKENS + IMAGE_TOKENS + DOCUMENT_TOKENS + 2)
    }))

  const withTools = makeRequest({
    model: "svc-x",
    tools: [{ name: "get_weather", inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } }],
    messages: [
      userMessage(question),
      assistantMessage([{ type: "tool_use", id: "t1", name: "get_weather", input: { city: "Paris" } }]),
      userMessage([{ type: "tool_result", toolUseId: "t1", content: "Hello world", isError: false }])
    ]
  })

  it.effect("counts tool definitions, tool calls and tool results", () =>
    Effect.gen(function*() {
      const toolTokens = TOOL_OVERHEAD_TOKENS + 2 + 19 // the schema is 19 tokens as JSON
      const callTokens = 2 + countTextTokensExact(JSON.stringify({ city: "Paris" }))
      assert.strictEqual(yield* countRequestTokens(withTools), REQUEST_OVERHEAD_TOKENS + toolTokens + 3 * MESSAGE_OVERHEAD_TOKENS + 7 + callTokens + 2)
    }))

  it.effect("is never above the bound metering reserves", () =>
    Effect.gen(function*() {
      const exact = yield* countRequestTokens(withTools)
      const bound = yield* requestTokenBound(withTools)
      assert.isAtLeast(bound, exact)
      assert.isBelow(bound, 3 * exact)
    }))

  it.effect("bounds the request as its parts' flat tokens plus the bound of their texts", () =>
    Effect.gen(function*() {
      const parts = yield* promptParts(withTools)
      const flat = parts.reduce((sum, part) => sum + part.flat, 0)
      assert.strictEqual(yield* requestTokenBound(withTools), flat + (yield* textsTokenBound(parts.flatMap((part) => part.texts.map(asString)))))
    }))

  it("bounds a large schema or tool-call input by its JSON's UTF-8 size, counted in slices", async () => {
    // Over the 256 Ki characters from which a value's JSON is made in slices.
    const schema = { type: "object", properties: { q: { type: "string", description: "the word é 😀 \"quoted\" ".repeat(15_000) } } }
    const input = { list: Array.from({ length: 3 }, (_, i) => `call ${i} `.repeat(40_000)) }
    const large = makeRequest({
      model: "svc-x",
      tools: [{ name: "lookup", inputSchema: schema }, { name: "small", inputSchema: { type: "object" } }],
      messages: [userMessage("hello there"), assistantMessage([{ type: "tool_use", id: "t1", name: "lookup", input }])]
    })
    const bound = await Effect.runPromise(requestTokenBound(large))
    // The large values count their JSON's bytes (made in slices, never the whole text at once);
    // everything else as before.
    const parts = await Effect.runPromise(promptParts(large))
    const largeTexts = new Set([JSON.stringify(schema), JSON.stringify(input)])
    const otherTexts = parts.flatMap((part) => part.texts.map(asString)).filter((text) => !largeTexts.has(text))
    const bytes = Buffer.byteLength(JSON.stringify(schema)) + Buffer.byteLength(JSON.stringify(input))
    assert.strictEqual(bound, parts.reduce((sum, part) => sum + part.flat, 0) + Effect.runSync(textsTokenBound(otherTexts)) + bytes)
    // The exact count makes the large values' JSON in slices and hands the pieces to the tokenizer
    // thread: the same count as their JSON.stringify text (copies of the request, whose values
    // neither has seen before).
    const fresh = structuredClone(large)
    const exact = await Effect.runPromise(countRequestTokens(fresh))
    assert.isTrue((await Effect.runPromise(promptParts(fresh))).some((part) => part.texts.some((text) => typeof text !== "string")), "the large values' JSON went as pieces")
    const copy = structuredClone(large)
    const sync = (await Effect.runPromise(countPartTokens(await Effect.runPromise(promptParts(copy))))).reduce((sum, n) => sum + n, 0)
    assert.strictEqual(exact, sync)
    assert.isAtLeast(bound, exact)
  })

  it("lets the event loop run while it bounds a request of many tiny messages", async () => {
    const many = makeRequest({ model: "svc-x", messages: Array.from({ length: 20_000 }, (_, i) => userMessage(`m${i}`)) })
    const { value, turns } = await loopTurnsDuring(() => Effect.runPromise(requestTokenBound(many)))
    const parts = await Effect.runPromise(promptParts(many))
    assert.strictEqual(value, parts.reduce((sum, part) => sum + part.flat, 0) + Effect.runSync(textsTokenBound(parts.flatMap((part) => part.texts.map(asString)))))
    // 20,000 texts of a few characters: without a cost per text they would be a few slices at most.
    assert.isAbove(turns, 20)
  })
})
