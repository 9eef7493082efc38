/**
 * The fuzz suite's generator and judge, shared by the bounded run in `npm test`
 * (`fuzz.test.ts`) and the soak (`bench/fuzz.ts`).
 *
 * Every route comes from `allRoutes`, so a new route is fuzzed without touching this file. A case
 * is one HTTP request: a route (sometimes with the wrong method or a mangled path), path ids
 * (real ones made at setup, random ones, hostile ones like `%00`), query parameters, credentials
 * (mostly right, so the input reaches the handler), a content type, and a body — the route's
 * sample body (known routes) or `{}` (new ones), mutated at a random field into a hostile value,
 * or replaced by raw hostile bytes. Hostile classes: NUL, unpaired surrogates, `%00`, huge
 * numbers, deep nesting, wrong types, huge strings within the body limit, invalid UTF-8, wrong
 * content types, duplicate keys, malformed JSON, huge object keys.
 *
 * The properties, per case: no status ≥ 500 and no hang; every error body in its surface's shape
 * (`src/http/render-error.ts`); a bystander `GET /v1/models` sent alongside answers (its latency
 * is recorded: the event loop must not be held), and the server still answers afterwards.
 */
import fc from "fast-check"
import { allRoutes } from "../../src/http/routes.ts"
import { type ErrorShape, makeMatcher } from "../../src/http/route.ts"
import type { GatewayProcess } from "../support/gateway-process.ts"

type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [key: string]: Json }

/** What a fuzzing run needs from the gateway it targets. */
export interface FuzzTarget {
  readonly gw: GatewayProcess
  /** The key the cases use (a dedicated one, so admin cases never revoke the judge's own). */
  readonly apiKey: string
  /** Real ids by the first path segment after the version: `states`, `agent-runs`, `keys`… */
  readonly ids: Readonly<Record<string, ReadonlyArray<string>>>
}

export interface FuzzOptions {
  /** Largest "huge string" in bodies (bytes). */
  readonly hugeBytes: number
  /** How long a response may take before the case counts as a hang. */
  readonly hangMs: number
}

export interface FuzzCase {
  readonly method: string
  readonly path: string
  readonly shape: ErrorShape
  readonly headers: Readonly<Record<string, string>>
  readonly body: string | Uint8Array | undefined
  /** Short description for reports. */
  readonly label: string
}

export interface CaseOutcome {
  readonly status: number | "hang" | "network-error"
  /** The server did not answer the bystander: later cases would only measure the same freeze. */
  readonly unresponsive: boolean
  readonly problems: ReadonlyArray<string>
  readonly bystanderMs: number
  readonly elapsedMs: number
}

// ---------------------------------------------------------------------------------------------
// Routes and their sample bodies

const TOOL_SCHEMA = { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } }, required: ["city"] }

/** A body that the route accepts, so mutations reach past the first check. Unknown routes get `{}`. */
const SAMPLES: Readonly<Record<string, Json>> = {
  "POST /v1/messages": {
    model: "svc-pico-1", max_tokens: 24, system: "be brief", stream: false,
    messages: [{ role: "user", content: [{ type: "text", text: "say exactly: hi" }] }],
    tools: [{ name: "get_weather", description: "weather", input_schema: TOOL_SCHEMA }],
    metadata: { user_id: "u1" }
  },
  "POST /v1/messages/count_tokens": {
    model: "svc-pico-1", system: "s", messages: [{ role: "user", content: "hello" }], tools: [{ name: "t", input_schema: TOOL_SCHEMA }]
  },
  "POST /v1/chat/completions": {
    model: "svc-pico-1", max_tokens: 24, stream: false,
    messages: [{ role: "system", content: "be brief" }, { role: "user", content: "hi" }],
    tools: [{ type: "function", function: { name: "get_weather", parameters: TOOL_SCHEMA } }],
    response_format: { type: "json_schema", json_schema: { name: "answer", schema: { type: "object", properties: { a: { type: "string" } } } } }
  },
  "POST /v1/completions": { model: "svc-pico-1", prompt: "once upon", max_tokens: 16, stream: false },
  "POST /v1/responses": {
    model: "svc-pico-1", input: "hi", instructions: "be brief", max_output_tokens: 24, store: true, stream: false,
    metadata: { a: "b" }, text: { format: { type: "json_schema", name: "answer", schema: { type: "object", properties: { a: { type: "string" } } } } }
  },
  "POST /v1/embeddings": { model: "svc-embed-mini", input: ["alpha", "beta"], encoding_format: "float" },
  "POST /v1/states": { value: { list: [1, "two"], nested: { ok: true } } },
  "POST /v1/states/{id}:append": { delta: { list: [3] }, expectedSeq: 0 },
  "POST /v1/agent-runs": {
    model: "svc-pico-1", input: "say exactly: done", budgetUsd: 1, metadata: { purpose: "fuzz" },
    tools: [{ name: "get_weather", input_schema: TOOL_SCHEMA }], optimization: { mode: "auto" }
  },
  "POST /v1/agent-runs/{id}/events": { events: [{ type: "note", text: "hello", n: 1 }] },
  "POST /v1/agent-runs/{id}/cancel": { reason: "fuzz" },
  "POST /admin/v1/keys": { name: "fuzz", plan: "free", permissions: { surfaces: ["chat", "states"], models: ["svc-*"] } },
  "PATCH /admin/v1/keys/{id}": { name: "renamed", plan: "pro" },
  "POST /admin/v1/keys/{id}/credits": { amountUsd: 1 },
  "POST /admin/v1/placements/{id}/faults": { mode: "none" },
  "POST /v1/messages/batches": {
    requests: [{ custom_id: "fuzz-1", params: { model: "svc-pico-1", max_tokens: 16, messages: [{ role: "user", content: "say exactly: hi" }] } }]
  },
  "POST /v1/batches": { input_file_id: "file-none", endpoint: "/v1/chat/completions", completion_window: "24h", metadata: { a: "b" } }
}

const QUERY_NAMES = ["limit", "after", "before", "status", "parentRunId", "keyId", "from", "to", "after_id", "before_id", "stream", "x"]
const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]

// ---------------------------------------------------------------------------------------------
// Hostile values

/** Placeholders replaced in the serialized body: building these as objects would need the stack. */
const DEEP = "\u0001DEEP\u0001"
const HUGE = "\u0001HUGE\u0001"

const hostileString = fc.constantFrom(
  "\u0000", "a\u0000b", "\ud800", "x\udc00y", "\ud83d", "\udfff\ud800", "", " ", "\u202e\u200b", "%00", "../../etc/passwd",
  "' OR 1=1 --", "__proto__", "constructor", "\r\nx-injected: 1", "🙂🙂", "svc-nova-mini", "*", DEEP, HUGE
)
const hostileNumber = fc.constantFrom(1e300, -1e300, 1e-300, 1.7976931348623157e308, -0, 0, -1, 0.5, 2 ** 31, 2 ** 53 + 2, -(2 ** 63), 1e21)

const hostileValue: fc.Arbitrary<Json> = fc.oneof(
  { weight: 4, arbitrary: hostileString },
  { weight: 3, arbitrary: hostileNumber },
  { weight: 2, arbitrary: fc.constantFrom<Json>(null, true, false, [], {}, [[]], { "": null }) },
  { weight: 2, arbitrary: fc.string({ unit: "binary", maxLength: 40 }) },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }) as fc.Arbitrary<Json> },
  { weight: 1, arbitrary: fc.integer() },
  { weight: 1, arbitrary: fc.array(hostileString, { maxLength: 4 }) }
)

/** Every path into a JSON value (objects and arrays), the root included. */
const pathsOf = (value: Json, prefix: ReadonlyArray<string | number> = []): Array<ReadonlyArray<string | number>> => {
  const out: Array<ReadonlyArray<string | number>> = [prefix]
  if (Array.isArray(value)) value.forEach((v, i) => out.push(...pathsOf(v, [...prefix, i])))
  else if (typeof value === "object" && value !== null) {
    for (const [k, v] of Object.entries(value)) out.push(...pathsOf(v as Json, [...prefix, k]))
  }
  return out
}

const clone = (value: Json): any => JSON.parse(JSON.stringify(value))

/** Sets (or, with `undefined`, deletes) the value at `path`; the root is replaced. */
const setAt = (root: Json, path: ReadonlyArray<string | number>, value: Json | undefined): Json | undefined => {
  if (path.length === 0) return value
  const copy = clone(root)
  let node = copy
  for (const key of path.slice(0, -1)) node = node[key]
  const last = path[path.length - 1]
  if (value === undefined) {
    if (Array.isArray(node)) node.splice(Number(last), 1)
    else delete node[last]
  } else node[last] = value
  return copy
}

/**
 * The shapes of huge strings: one repeated letter, random letters and emoji are the inputs the
 * o200k tokenizer is slowest on (one long pre-token); `x` runs are cheap for it.
 */
export type HugeKind = "x" | "A" | "letters" | "emoji"

/** Made once per shape and size: the sweep asks for the same few hundreds of times. */
const hugeStrings = new Map<string, string>()

const hugeString = (kind: HugeKind, bytes: number): string => {
  const key = `${kind}:${bytes}`
  let made = hugeStrings.get(key)
  if (made === undefined) {
    made = makeHugeString(kind, bytes)
    if (hugeStrings.size > 64) hugeStrings.clear() // random sizes in the soak: keep it bounded
    hugeStrings.set(key, made)
  }
  return made
}

const makeHugeString = (kind: HugeKind, bytes: number): string => {
  switch (kind) {
    case "x":
      return "x".repeat(bytes)
    case "A":
      return "A".repeat(bytes)
    case "emoji":
      return "🙂".repeat(Math.floor(bytes / 4))
    case "letters": {
      const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
      const out = new Array<string>(bytes)
      let state = 12_345
      for (let i = 0; i < bytes; i++) {
        state = (state * 1_103_515_245 + 12_345) % 2_147_483_648
        out[i] = letters[state % 52]
      }
      return out.join("")
    }
  }
}

/** JSON text for a body, with the DEEP and HUGE placeholders expanded. */
const serialize = (value: Json | undefined, hugeBytes: number, depth: number, hugeKind: HugeKind = "x"): string => {
  const text = JSON.stringify(value) ?? ""
  return text
    .replaceAll(JSON.stringify(DEEP), "[".repeat(depth) + "]".repeat(depth))
    .replaceAll(JSON.stringify(HUGE), () => JSON.stringify(hugeString(hugeKind, hugeBytes)))
}

const invalidUtf8 = (around: string) => {
  const [head, tail] = [around.slice(0, Math.floor(around.length / 2)), around.slice(Math.floor(around.length / 2))]
  return new Uint8Array([...Buffer.from(head), 0xff, 0xfe, 0xc3, 0x28, 0xed, 0xa0, 0x80, 0xf4, 0x90, 0x80, 0x80, ...Buffer.from(tail)])
}

type RawKind = "malformed" | "invalid-utf8" | "duplicate-keys" | "bom" | "deep-root" | "numbers" | "form" | "empty" | "scalar" | "huge-body" | "huge-key"

const rawBody = (kind: RawKind, sample: Json, hugeBytes: number, hugeKind: HugeKind): string | Uint8Array => {
  const text = JSON.stringify(sample)
  switch (kind) {
    case "malformed":
      return text.slice(0, Math.max(1, Math.floor(text.length / 2)))
    case "invalid-utf8":
      return invalidUtf8(text)
    case "duplicate-keys": {
      const first = typeof sample === "object" && sample !== null && !Array.isArray(sample) ? Object.keys(sample)[0] : undefined
      return first === undefined ? `{"a":1,"a":"\\u0000"}` : `{${JSON.stringify(first)}:"\\ud800",${text.slice(1)}`
    }
    case "bom":
      return "\ufeff" + text
    case "deep-root":
      return "[".repeat(20_000) + "]".repeat(20_000)
    case "numbers":
      return `{"value":[${Array(20_000).fill("1e308").join(",")}],"n":1e999}`
    case "form":
      return "model=svc-pico-1&messages=hi"
    case "empty":
      return ""
    case "scalar":
      return "null"
    case "huge-body":
      return JSON.stringify({ ...(typeof sample === "object" && sample !== null && !Array.isArray(sample) ? sample : {}), padding: hugeString(hugeKind, hugeBytes) })
    case "huge-key":
      // A huge string as an object's key (V8 hashes a key when it is set), in the body's first field.
      return JSON.stringify({ ...(typeof sample === "object" && sample !== null && !Array.isArray(sample) ? sample : {}), metadata: { [hugeString(hugeKind, hugeBytes)]: "v" } })
  }
}

// ---------------------------------------------------------------------------------------------
// Cases

const routeKey = (method: string, path: string) => `${method} ${path}`

const contentTypes = fc.oneof(
  { weight: 8, arbitrary: fc.constant("application/json") },
  { weight: 1, arbitrary: fc.constantFrom("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/json; charset=latin1", "") }
)

const HOSTILE_IDS = ["%00", "a%00b", "%ED%A0%80", "%FF", "%zz", "..", "%2F", "run_%00", "state_x%00", "x".repeat(3_000), "%F0%9F%99%82", "key_does_not_exist"]

/** How a path id is chosen: a real one of the route's family (mostly), a hostile one, or random. */
const idChoice = fc.record({
  kind: fc.oneof({ weight: 6, arbitrary: fc.constant("real" as const) }, { weight: 2, arbitrary: fc.constant("hostile" as const) }, { weight: 1, arbitrary: fc.constant("random" as const) }),
  index: fc.nat(),
  random: fc.string({ minLength: 1, maxLength: 30 }).map(encodeURIComponent)
})

const pickId = (target: FuzzTarget, path: string, choice: typeof idChoice extends fc.Arbitrary<infer T> ? T : never) => {
  const family = path.split("/").filter((s) => s !== "" && s !== "v1" && s !== "admin")[0] ?? ""
  const real = target.ids[family] ?? []
  if (choice.kind === "real" && real.length > 0) return real[choice.index % real.length]
  if (choice.kind === "random") return choice.random
  return HOSTILE_IDS[choice.index % HOSTILE_IDS.length]
}

const queryFor = fc.array(
  fc.tuple(
    fc.oneof(fc.constantFrom(...QUERY_NAMES), fc.string({ maxLength: 8 })),
    fc.oneof(
      fc.constantFrom("%00", "%ED%A0%80", "-1", "0", "1", "1e308", "abc", "-271821-04-20T00:00:00Z", "+275760-09-13T00:00:00Z", "99999999999999999", "running", "", "x".repeat(2_000)),
      fc.string({ maxLength: 20 }).map(encodeURIComponent)
    )
  ),
  { maxLength: 3 }
).map((pairs) => pairs.map(([k, v]) => `${encodeURIComponent(k)}=${v}`).join("&"))

/** The random choices one case is built from. */
const choicesArbitrary = fc.record({
  routeIndex: fc.nat({ max: allRoutes.length - 1 }),
  methodSwap: fc.oneof({ weight: 12, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.constantFrom(...METHODS) }),
  pathMangle: fc.oneof({ weight: 14, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.constantFrom("/extra", "/", "//", "/%00", "/..") }),
  ids: fc.array(idChoice, { minLength: 3, maxLength: 3 }),
  query: fc.oneof({ weight: 3, arbitrary: fc.constant("") }, { weight: 1, arbitrary: queryFor }),
  auth: fc.oneof({ weight: 10, arbitrary: fc.constant("right") }, { weight: 1, arbitrary: fc.constantFrom("none", "wrong", "other") }),
  contentType: contentTypes,
  extraHeaders: fc.oneof(
    { weight: 6, arbitrary: fc.constant({}) },
    {
      weight: 1,
      arbitrary: fc.record({
        "idempotency-key": fc.oneof(fc.string({ unit: "grapheme-ascii", minLength: 1, maxLength: 30 }), fc.constant("k".repeat(300))),
        "if-match": fc.constantFrom('"0"', '"-1"', "*", 'W/"3"', "garbage"),
        "last-event-id": fc.constantFrom("0", "-1", "1e308", "abc", "99999999999999999999"),
        "anthropic-version": fc.constant("2023-06-01")
      }, { requiredKeys: [] })
    }
  ),
  body: fc.oneof(
    { weight: 2, arbitrary: fc.record({ kind: fc.constant("valid" as const) }) },
    { weight: 6, arbitrary: fc.record({ kind: fc.constant("set" as const), at: fc.nat(), value: hostileValue, newKey: fc.option(fc.string({ maxLength: 10 }), { nil: undefined }) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant("drop" as const), at: fc.nat() }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant("raw" as const), raw: fc.constantFrom<RawKind>("malformed", "invalid-utf8", "duplicate-keys", "bom", "deep-root", "numbers", "form", "empty", "scalar", "huge-body", "huge-key") }) }
  ),
  stream: fc.boolean(),
  depth: fc.constantFrom(200, 5_000, 50_000),
  hugeFraction: fc.double({ min: 0.05, max: 1, noNaN: true }),
  hugeKind: fc.constantFrom<HugeKind>("x", "A", "letters", "emoji")
})

export type Choices = typeof choicesArbitrary extends fc.Arbitrary<infer T> ? T : never

const matchRoute = makeMatcher(allRoutes)
/** The error shape the server answers a path in: its route's, or (unmatched) its family's. */
const shapeOfPath = (method: string, path: string): ErrorShape => {
  const found = matchRoute(method, path)
  return found._tag === "Found" ? found.route.shape : found.shape
}

/** The request a set of choices describes. */
export const buildCase = (target: FuzzTarget, options: FuzzOptions, c: Choices): FuzzCase => {
  const route = allRoutes[c.routeIndex]
  const method = c.methodSwap ?? route.method
  const sample: Json = SAMPLES[routeKey(route.method, route.path)] ?? {}
  const withStream = c.stream && typeof sample === "object" && sample !== null && !Array.isArray(sample) && "stream" in sample
    ? { ...sample, stream: true }
    : sample
  let i = 0
  const filled = route.path.replace(/\{(\w+)\}/g, () => pickId(target, route.path, c.ids[i++ % 3]))
  const path = filled + (c.pathMangle ?? "") + (c.query === "" ? "" : `?${c.query}`)
  const hugeBytes = Math.floor(options.hugeBytes * c.hugeFraction)
  const paths = pathsOf(withStream)
  let body: string | Uint8Array | undefined
  let label: string
  switch (c.body.kind) {
    case "valid":
      body = serialize(withStream, hugeBytes, c.depth, c.hugeKind)
      label = "valid body"
      break
    case "set": {
      const where = c.body.newKey !== undefined && typeof withStream === "object" && withStream !== null && !Array.isArray(withStream)
        ? [c.body.newKey]
        : paths[c.body.at % paths.length]
      body = serialize(setAt(withStream, where, c.body.value), hugeBytes, c.depth, c.hugeKind)
      label = `set ${JSON.stringify(where)} = ${JSON.stringify(c.body.value)?.slice(0, 60)}`
      break
    }
    case "drop": {
      const at = paths[c.body.at % paths.length]
      body = serialize(setAt(withStream, at, undefined), hugeBytes, c.depth, c.hugeKind)
      label = `drop ${JSON.stringify(at)}`
      break
    }
    case "raw":
      body = rawBody(c.body.raw, withStream, hugeBytes, c.hugeKind)
      label = `raw ${c.body.raw}`
      break
  }
  if (method === "GET" || method === "DELETE") body = undefined
  const headers: Record<string, string> = { ...c.extraHeaders }
  if (c.contentType !== "" && body !== undefined) headers["content-type"] = c.contentType
  const credential = route.auth === "admin" ? target.gw.adminToken : target.apiKey
  switch (c.auth) {
    case "right":
      if (route.auth === "messages") headers["x-api-key"] = credential
      else if (route.auth !== "none") headers.authorization = `Bearer ${credential}`
      break
    case "wrong":
      headers.authorization = "Bearer svc_not_a_real_key"
      break
    case "other":
      headers.authorization = `Bearer ${route.auth === "admin" ? target.apiKey : target.gw.adminToken}`
      break
    case "none":
      break
  }
  // A mangled path (or one a client normalizes, like `..`) may match another route or none: its
  // errors take the shape of what the server matches for the path it sees (for no route, that of
  // the path's family).
  const sent = new URL(path, "http://gateway").pathname
  const shape = c.pathMangle === undefined && sent === path.split("?")[0] ? route.shape : shapeOfPath(method, sent)
  const huge = label.includes("HUGE") || label.includes("huge-body") || label.includes("huge-key") ? ` huge=${c.hugeKind}×${hugeBytes}` : ""
  return { method, path, shape, headers, body, label: `${method} ${path.slice(0, 120)} [${label}]${huge} auth=${c.auth} ct=${c.contentType}` }
}

const SWEEP_VALUES: ReadonlyArray<Json> = ["a\u0000b", "\ud800", 1e300, -1e300, DEEP, HUGE, [], { "\u0000": "\udc00" }]
const RAW_KINDS: ReadonlyArray<RawKind> = ["malformed", "invalid-utf8", "duplicate-keys", "bom", "deep-root", "numbers", "form", "empty", "scalar", "huge-body", "huge-key"]

/**
 * Every route with every hostile class at least once, deterministically: each body route gets
 * each hostile value (at a field that moves through its sample) and each raw body; each route
 * with an id gets each hostile id.
 */
export const sweepCases = (target: FuzzTarget, options: FuzzOptions): ReadonlyArray<FuzzCase> => {
  const base: Omit<Choices, "routeIndex" | "body"> = {
    methodSwap: undefined,
    pathMangle: undefined,
    ids: [{ kind: "real", index: 0, random: "x" }, { kind: "real", index: 1, random: "x" }, { kind: "real", index: 2, random: "x" }],
    query: "",
    auth: "right",
    contentType: "application/json",
    extraHeaders: {},
    stream: false,
    depth: 5_000,
    hugeFraction: 1,
    hugeKind: "x"
  }
  const cases: Array<FuzzCase> = []
  allRoutes.forEach((route, routeIndex) => {
    if (route.method !== "GET" && route.method !== "DELETE") {
      SWEEP_VALUES.forEach((value, i) => cases.push(buildCase(target, options, { ...base, routeIndex, body: { kind: "set", at: i + 1, value, newKey: undefined } })))
      for (const hugeKind of ["A", "letters", "emoji"] as const) {
        cases.push(buildCase(target, options, { ...base, hugeKind, routeIndex, body: { kind: "set", at: SWEEP_VALUES.length + 1, value: HUGE, newKey: undefined } }))
      }
      for (const raw of RAW_KINDS) cases.push(buildCase(target, options, { ...base, routeIndex, body: { kind: "raw", raw } }))
    }
    if (route.path.includes("{")) {
      HOSTILE_IDS.forEach((_, index) =>
        cases.push(buildCase(target, options, { ...base, routeIndex, ids: [0, 1, 2].map(() => ({ kind: "hostile" as const, index, random: "x" })), body: { kind: "valid" } }))
      )
    }
  })
  return cases
}

/** One random case against `target`. */
export const caseArbitrary = (target: FuzzTarget, options: FuzzOptions): fc.Arbitrary<FuzzCase> =>
  choicesArbitrary.map((c) => buildCase(target, options, c))

// ---------------------------------------------------------------------------------------------
// Judging one case

const isString = (v: unknown): v is string => typeof v === "string"

/** Problems with an error body for the surface's shape, or none. */
/** The largest error body a case may get: every message rendered is at most 8 KiB (`http/render-error.ts`). */
const MAX_ERROR_BODY_CHARS = 10 * 1024

export const shapeProblems = (shape: ErrorShape, body: unknown): ReadonlyArray<string> => {
  const b = body as any
  if (typeof b !== "object" || b === null) return [`error body is not a JSON object`]
  const e = b.error
  if (typeof e !== "object" || e === null || !isString(e.type) || !isString(e.message) || e.message === "") {
    return [`error body lacks error.type/error.message: ${JSON.stringify(b).slice(0, 200)}`]
  }
  switch (shape) {
    case "messages":
      return b.type === "error" ? [] : [`messages error body lacks type:"error"`]
    case "openai":
      return "param" in e && "code" in e ? [] : [`openai error body lacks param/code`]
    case "flat":
      return Object.keys(e).every((k) => k === "type" || k === "message") && Object.keys(b).length === 1
        ? []
        : [`flat error body has extra fields: ${JSON.stringify(b).slice(0, 200)}`]
  }
}

export const SSE_END: Readonly<Record<string, RegExp>> = {
  "/v1/messages": /event: (message_stop|error)\n/,
  "/v1/chat/completions": /data: \[DONE\]|data: \{"error"/,
  "/v1/completions": /data: \[DONE\]|data: \{"error"/,
  "/v1/responses": /event: (response\.completed|response\.incomplete|response\.failed|error)\n/
}

/** Reads a body for at most `ms` (streams may be endless, e.g. a run's events). */
export const readBounded = async (response: Response, ms: number, maxBytes: number) => {
  const reader = response.body?.getReader()
  if (reader === undefined) return { text: "", complete: true }
  const decoder = new TextDecoder()
  let text = ""
  // One deadline for the whole read, not a timer per chunk (a large answer arrives in thousands).
  let timer: ReturnType<typeof setTimeout> | undefined
  const late = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), ms)))
  try {
    while (true) {
      const next = text.length > maxBytes ? "late" : await Promise.race([reader.read(), late])
      if (next === "late") {
        await reader.cancel().catch(() => undefined)
        return { text, complete: false }
      }
      if (next.done) return { text: text + decoder.decode(), complete: true }
      text += decoder.decode(next.value, { stream: true })
    }
  } finally {
    clearTimeout(timer)
  }
}

const timed = async <A>(f: () => Promise<A>) => {
  const started = performance.now()
  const value = await f()
  return { value, ms: performance.now() - started }
}

/** Sends one case with a bystander beside it and judges the outcome. */
export const runCase = async (target: FuzzTarget, c: FuzzCase, options: FuzzOptions): Promise<CaseOutcome> => {
  const problems: Array<string> = []
  const abort = new AbortController()
  const hang = setTimeout(() => abort.abort(), options.hangMs)
  const started = performance.now()
  const request = fetch(`${target.gw.baseUrl}${c.path}`, {
    method: c.method,
    headers: c.headers,
    signal: abort.signal,
    ...(c.body === undefined ? {} : { body: c.body as BodyInit })
  }).then(
    async (response) => {
      const isSse = (response.headers.get("content-type") ?? "").includes("text/event-stream")
      const { text, complete } = await readBounded(response, isSse ? 2_000 : options.hangMs, 64 * 1024 * 1024)
      return { response, text, complete, isSse }
    },
    (error: Error) => error
  )
  // The bystander starts while the case is being processed; it must answer however bad the case.
  const bystander = timed(() =>
    new Promise((r) => setTimeout(r, 2))
      .then(() => fetch(`${target.gw.baseUrl}/v1/models`, { signal: AbortSignal.timeout(options.hangMs) }))
      .then((r) => r.text().then(() => r.status), () => "no answer" as const)
  )
  const [result, seen] = await Promise.all([request, bystander])
  clearTimeout(hang)
  const elapsedMs = performance.now() - started
  if (seen.value !== 200) problems.push(`bystander GET /v1/models: ${seen.value === "no answer" ? `no answer within ${options.hangMs} ms` : `answered ${seen.value}`}`)
  if (result instanceof Error) {
    const status = abort.signal.aborted ? "hang" : "network-error"
    // A server may close a connection it refuses (e.g. a malformed request line); it must not hang.
    if (status === "hang") problems.push(`no response within ${options.hangMs} ms`)
    return { status, problems, bystanderMs: seen.ms, elapsedMs, unresponsive: seen.value === "no answer" }
  }
  const { response, text, complete, isSse } = result
  const status = response.status
  if (status >= 500) problems.push(`status ${status}: ${text.slice(0, 300)}`)
  if (status >= 400) {
    // An error names what was wrong, quoting a client's value short (`shown`): a body of the size
    // of what was sent is an echo (a model name of 30 MiB came back whole in a 404).
    if (text.length > MAX_ERROR_BODY_CHARS) problems.push(`error body of ${text.length} characters (an echo of the request?): ${text.slice(0, 160)}`)
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch {
      problems.push(`error body is not JSON: ${text.slice(0, 200)}`)
    }
    // With what was answered, so a soak's summary shows the body, not only the rule it broke.
    if (parsed !== undefined) problems.push(...shapeProblems(c.shape, parsed).map((problem) => `${problem} (${status}: ${text.slice(0, 160)})`))
  } else if (isSse && complete) {
    const end = SSE_END[c.path.split("?")[0]]
    if (end !== undefined && !end.test(text)) problems.push(`stream ended without its terminal event: …${text.slice(-200)}`)
  } else if (!isSse && complete && (response.headers.get("content-type") ?? "").includes("json")) {
    try {
      JSON.parse(text)
    } catch {
      problems.push(`2xx JSON body does not parse: ${text.slice(0, 200)}`)
    }
  }
  return { status, problems, bystanderMs: seen.ms, elapsedMs, unresponsive: seen.value === "no answer" }
}

// ---------------------------------------------------------------------------------------------
// Runs

export interface FuzzReport {
  tried: number
  byStatus: Record<string, number>
  failures: Array<{ label: string; problems: ReadonlyArray<string> }>
  /** The slowest bystander and the case it stood beside. */
  worstBystander: { ms: number; label: string }
  serverDied: boolean
  /** Set when a case froze the server; the run stops there. */
  frozeOn: string | undefined
}

export const emptyReport = (): FuzzReport => ({ tried: 0, byStatus: {}, failures: [], worstBystander: { ms: 0, label: "" }, serverDied: false, frozeOn: undefined })

/** Generated cases: `numRuns` from `seed`. */
export const randomCases = (target: FuzzTarget, options: FuzzOptions & { readonly seed: number; readonly numRuns: number }) =>
  fc.sample(caseArbitrary(target, options), { seed: options.seed, numRuns: options.numRuns })

/** Cases that change the gateway for every later case (a placement's faults): run alone. */
const isExclusive = (c: FuzzCase) => c.path.startsWith("/admin/v1/placements/")

/**
 * Runs the cases against the target, adding to `report`: `concurrency` cases at a time (each with
 * its own bystander), in order. A case that injects faults runs alone and its faults are cleared
 * before the next starts, so no other case meets them. When a case leaves the server unresponsive
 * no new case starts, and the report names every case that was in flight.
 */
export const runCases = async (target: FuzzTarget, cases: ReadonlyArray<FuzzCase>, options: FuzzOptions, report: FuzzReport = emptyReport(), concurrency = 1) => {
  const inFlight = new Set<Promise<void>>()
  const running = new Set<FuzzCase>()
  let stop = false
  const record = (c: FuzzCase, outcome: CaseOutcome) => {
    report.tried++
    report.byStatus[String(outcome.status)] = (report.byStatus[String(outcome.status)] ?? 0) + 1
    if (outcome.problems.length > 0) report.failures.push({ label: c.label, problems: outcome.problems })
    if (outcome.bystanderMs > report.worstBystander.ms) report.worstBystander = { ms: Math.round(outcome.bystanderMs), label: c.label }
    if (outcome.unresponsive && report.frozeOn === undefined) {
      report.frozeOn = running.size > 1 ? `one of these concurrent cases:\n${[...running].map((r) => r.label).join("\n")}` : c.label
      stop = true
    }
    if (target.gw.child.exitCode !== null && !report.serverDied) {
      report.serverDied = true
      report.failures.push({ label: c.label, problems: [`the server exited (${target.gw.child.exitCode})`] })
      stop = true
    }
  }
  const drain = async () => {
    while (inFlight.size > 0) await Promise.race(inFlight)
  }
  for (const c of cases) {
    if (stop) break
    const exclusive = isExclusive(c)
    if (exclusive) await drain()
    while (inFlight.size >= concurrency) await Promise.race(inFlight)
    if (stop) break
    running.add(c)
    const done: Promise<void> = runCase(target, c, options).then((outcome) => {
      record(c, outcome)
      running.delete(c)
      inFlight.delete(done)
    })
    inFlight.add(done)
    if (exclusive) {
      await drain()
      // Faults injected by a case would make later chat calls fail on purpose: clear them.
      await clearFaults(target)
    }
  }
  await drain()
  return report
}

const clearFaults = async (target: FuzzTarget) => {
  for (const id of target.ids.placements ?? []) await target.gw.admin("POST", `/admin/v1/placements/${id}/faults`, { mode: "none" })
}

/** 5xx count of a report (what the issue asks to be zero): every route is served, so no 501 is expected either. */
export const fiveXX = (report: FuzzReport) => Object.entries(report.byStatus).filter(([s]) => Number(s) >= 500).reduce((n, [, c]) => n + c, 0)

// ---------------------------------------------------------------------------------------------
// Setup: real ids to aim at

const json = async (response: Response) => (await response.json()) as any

/** Creates a key for the cases, a victim key for admin cases, a state, runs and a stored response. */
export const prepareTarget = async (gw: GatewayProcess): Promise<FuzzTarget> => {
  // The default plan: the suites' configs make it generous, so cases are not cut short by 429s.
  const created = await json(await gw.admin("POST", "/admin/v1/keys", { name: "fuzzer" }))
  const apiKey = created.key as string
  const victim = await json(await gw.admin("POST", "/admin/v1/keys", { name: "victim", plan: "prepaid" }))
  const headers = { authorization: `Bearer ${apiKey}`, "content-type": "application/json" }
  const post = (path: string, body: unknown) => fetch(`${gw.baseUrl}${path}`, { method: "POST", headers, body: JSON.stringify(body) }).then(json)
  const state = await post("/v1/states", { value: { list: [1] } })
  const callerRun = await post("/v1/agent-runs", { metadata: { fuzz: true } })
  const modelRun = await post("/v1/agent-runs", { model: "svc-pico-1", input: "say exactly: hi" })
  const response = await post("/v1/responses", { model: "svc-pico-1", input: "hi", store: true, max_output_tokens: 16 })
  const queues = await json(await gw.admin("GET", "/admin/v1/queues"))
  const models = await json(await fetch(`${gw.baseUrl}/v1/models`))
  return {
    gw,
    apiKey,
    ids: {
      keys: [victim.id],
      states: [state.state.stateId],
      "agent-runs": [callerRun.run.id, modelRun.run.id],
      responses: typeof response.id === "string" ? [response.id] : [],
      placements: queues.data.map((q: { placementId: string }) => q.placementId),
      models: models.data.map((m: { id: string }) => m.id).slice(0, 3)
    }
  }
}
