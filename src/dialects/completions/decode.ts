/**
 * Legacy completions request (`POST /v1/completions`) → canonical request: the prompt becomes
 * one user turn. What the gateway cannot honor is refused with a 400 naming the field rather than
 * silently ignored: token-array or multiple prompts, `suffix` (no insert mode), `logprobs`,
 * `best_of` and `n` other than 1. `echo` is supported by prefixing the prompt to the text.
 */
import { Effect, Schema } from "effect"
import type { InvalidRequest } from "../../errors.ts"
import { userMessage } from "../../model/content.ts"
import { makeRequest } from "../../model/request.ts"
import { isLarge, jsonTextPiecesInSlices } from "../../util/sliced-stringify.ts"
import { checkSingleChoice, PositiveInt, Stop, stopSequences, StreamOptions, Temperature, TopP } from "../chat/wire-decode.ts"
import type { Decoded } from "../dialect.ts"
import { decodeRequest, decoderAt, definedFields, given, opt, refuse, whole } from "../staged-decode.ts"

/** OpenAI's default output ceiling for legacy completions. */
const COMPLETIONS_DEFAULT_MAX_TOKENS = 16

export interface CompletionsEcho {
  readonly includeUsage: boolean
  /** The prompt, when `echo` asked for it to lead the text. */
  readonly echoPrompt?: string
  /**
   * The echoed prompt's JSON text in pieces, made in slices, when a stream echoes a large one: its
   * first chunk carries the whole prompt, and serialized at once a 32 MiB prompt held the event
   * loop ~150 ms (`bench/big-body.ts --surface completions --shape echo`).
   */
  readonly echoPromptJson?: ReadonlyArray<string>
}

const CompletionsRequestWire = Schema.Struct({
  model: Schema.NonEmptyString,
  prompt: Schema.Union([Schema.String, Schema.Array(Schema.Unknown)]),
  max_tokens: opt(PositiveInt),
  temperature: opt(Temperature),
  top_p: opt(TopP),
  stop: opt(Stop),
  stream: opt(Schema.Boolean),
  stream_options: opt(StreamOptions),
  seed: opt(Schema.Int),
  user: opt(Schema.String),
  echo: opt(Schema.Boolean),
  suffix: opt(Schema.String),
  n: opt(Schema.Int),
  best_of: opt(Schema.Int),
  logprobs: opt(Schema.Int)
})
type CompletionsRequestWire = typeof CompletionsRequestWire.Type

const decodeEnvelope = decoderAt(CompletionsRequestWire)

/** One prompt string; a list is accepted when it holds exactly one string. */
const promptText = (prompt: string | ReadonlyArray<unknown>): string => {
  if (typeof prompt === "string") return prompt
  if (prompt.length === 1 && typeof prompt[0] === "string") return prompt[0]
  if (prompt.length > 0 && prompt.every((item) => typeof item === "string")) {
    return refuse("prompt", "only one prompt per request is supported; send one request per prompt")
  }
  return refuse("prompt", "expected a string (or a list of one string); token arrays are not supported")
}

const refuseUnsupported = (wire: CompletionsRequestWire): void => {
  if (given(wire.suffix) !== undefined && wire.suffix !== "") refuse("suffix", "suffix (insert mode) is not supported")
  if (given(wire.logprobs) !== undefined) refuse("logprobs", "logprobs are not supported")
  if (given(wire.best_of) !== undefined && wire.best_of !== 1) refuse("best_of", "only best_of=1 is supported")
  checkSingleChoice(wire.n)
}

/** The canonical request of a legacy completions body; throws the 400 naming the first bad field. */
const completionsRequestOf = (body: unknown): Decoded<CompletionsEcho> => {
  const wire = decodeEnvelope(body, "")
  refuseUnsupported(wire)
  const prompt = promptText(wire.prompt)
  const request = makeRequest({
    model: wire.model,
    messages: [userMessage(prompt)],
    maxOutputTokens: given(wire.max_tokens) ?? COMPLETIONS_DEFAULT_MAX_TOKENS,
    stopSequences: stopSequences(wire.stop),
    stream: wire.stream === true,
    ...definedFields({
      temperature: given(wire.temperature),
      topP: given(wire.top_p),
      seed: given(wire.seed),
      user: given(wire.user),
      cacheAffinity: given(wire.user)
    })
  })
  const echo: CompletionsEcho = {
    includeUsage: wire.stream_options?.include_usage === true,
    ...(wire.echo === true ? { echoPrompt: prompt } : {})
  }
  return { request, echo }
}

const decodeStaged = decodeRequest(whole(completionsRequestOf))

export const decodeCompletionsRequest = (body: unknown): Effect.Effect<Decoded<CompletionsEcho>, InvalidRequest> =>
  Effect.flatMap(decodeStaged(body), (decoded) => {
    const prompt = decoded.echo.echoPrompt
    if (prompt === undefined || !decoded.request.stream || !isLarge(prompt)) return Effect.succeed(decoded)
    return Effect.map(jsonTextPiecesInSlices(prompt), (json) => ({ ...decoded, echo: { ...decoded.echo, echoPromptJson: json } }))
  })
