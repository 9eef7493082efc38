/**
 * State handles (flat surface, Bearer auth): create, append (colon path), read. Every response
 * carries `ETag: "<seq>"`; an append may name the seq it expects in `expectedSeq` or `If-Match`.
 */
import { Effect, Schema } from "effect"
import { InvalidRequest } from "../errors.ts"
import type { Json } from "../util/json.ts"
import { type State, StatesRepo } from "../states/states-repo.ts"
import { readBody } from "./body.ts"
import { bytesResponse } from "./json.ts"
import { type RequestContext, requireKey, type RouteDef } from "./route.ts"

const CreateBody = Schema.Struct({ value: Schema.optional(Schema.Unknown) })
const AppendBody = Schema.Struct({
  delta: Schema.Unknown,
  expectedSeq: Schema.optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)))
})
const readCreate = readBody(CreateBody, { optional: true, storable: true })
const readAppend = readBody(AppendBody, { storable: true })

/**
 * `{"state":{"stateId","seq","value"}}` with the value's stored text as it is (never parsed or
 * serialized again); a large one goes out a piece per write, with its length.
 */
const stateResponse = (state: State, status = 200) =>
  bytesResponse([
    Buffer.from(`{"state":{"stateId":${JSON.stringify(state.stateId)},"seq":${state.seq},"value":`),
    ...state.text,
    Buffer.from("}}")
  ], { status, contentType: "application/json", headers: { etag: `"${state.seq}"` } })

/** `If-Match: "3"` (or `3`) as an expected seq. */
const ifMatchSeq = (header: string | undefined) => {
  if (header === undefined) return Effect.succeed(undefined)
  const m = /^\s*(?:W\/)?"?(\d+)"?\s*$/.exec(header)
  return m === null
    ? Effect.fail(new InvalidRequest({ message: "If-Match: expected a state seq such as \"3\"", param: "If-Match" }))
    : Effect.succeed(Number(m[1]))
}

const create = Effect.fnUntraced(function*(ctx: RequestContext) {
  const key = yield* requireKey(ctx)
  const body = yield* readCreate(ctx)
  const repo = yield* StatesRepo
  return stateResponse(yield* repo.create(key.id, (body.value ?? null) as Json), 201)
})

const append = Effect.fnUntraced(function*(ctx: RequestContext) {
  const key = yield* requireKey(ctx)
  const body = yield* readAppend(ctx)
  const fromHeader = yield* ifMatchSeq(ctx.headers["if-match"])
  if (fromHeader !== undefined && body.expectedSeq !== undefined && fromHeader !== body.expectedSeq) {
    return yield* new InvalidRequest({ message: "expectedSeq and If-Match disagree", param: "expectedSeq" })
  }
  const repo = yield* StatesRepo
  return stateResponse(yield* repo.append(key.id, ctx.params.id, body.delta as Json, body.expectedSeq ?? fromHeader))
})

const get = Effect.fnUntraced(function*(ctx: RequestContext) {
  const key = yield* requireKey(ctx)
  const repo = yield* StatesRepo
  return stateResponse(yield* repo.get(key.id, ctx.params.id))
})

export const statesRoutes: ReadonlyArray<RouteDef<StatesRepo>> = [
  { method: "POST", path: "/v1/states", shape: "flat", auth: "bearer", surface: "states", handler: create },
  { method: "POST", path: "/v1/states/{id}:append", shape: "flat", auth: "bearer", surface: "states", handler: append },
  { method: "GET", path: "/v1/states/{id}", shape: "flat", auth: "bearer", surface: "states", handler: get }
]
