import { Effect } from "effect"
import { decodeChatRequest } from "../src/dialects/chat/decode.ts"
import { decodeCountTokens as decodeMessagesRequest } from "../src/dialects/messages/index.ts"
import { promptParts, requestTokenBound } from "../src/model/tokens.ts"
import { toWireRequest } from "../src/backends/openai-compatible/wire-request.ts"
import { toWireRequest as toAnthropic } from "../src/backends/anthropic/wire-request.ts"
import { prepareRequest } from "../src/catalog/requirements.ts"
import { findTooDeep, findUnstorable } from "../src/util/json-limits.ts"
const n = Number(process.argv[2] ?? 21000)
const text = `{"model":"m","max_tokens":16,"messages":[` + Array(n).fill(`{"role":"user","content":"a"}`).join(",") + "]}"
const t = <A>(label: string, f: () => A): A => { let best = Infinity; let out!: A; for (let i = 0; i < 5; i++) { const s = performance.now(); out = f(); best = Math.min(best, performance.now() - s) } console.log(label.padEnd(28), best.toFixed(2), "ms"); return out }
const body = t("JSON.parse", () => JSON.parse(text))
t("findTooDeep", () => findTooDeep(body))
t("findUnstorable", () => findUnstorable(body))
const decoded = t("chat decode", () => Effect.runSync(decodeChatRequest(body)))
t("messages decode", () => Effect.runSync(decodeMessagesRequest(body)))
t("promptParts", () => promptParts(decoded.request))
const model: any = { id: "m", capabilities: { vision: false, documents: false, tools: true, reasoning: false }, maxOutput: 1000, placements: [] }
t("prepareRequest", () => Effect.runSync(prepareRequest(model, decoded.request)))
const placement: any = { id: "p", modelId: "m", upstream: { baseUrl: "http://x/v1", model: "fixed" }, upstreamModel: "fixed" }
const wire = t("openai toWireRequest", () => toWireRequest(decoded.request, placement, false))
t("JSON.stringify openai wire", () => JSON.stringify(wire))
try { t("anthropic toWire+stringify", () => JSON.stringify(toAnthropic(decoded.request, { model: "x" } as any, false))) } catch (e) { console.log("anthropic", (e as Error).message) }
