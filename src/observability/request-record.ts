/**
 * What one HTTP request did, filled in as it goes by the code that knows each fact (app.ts: route,
 * key, status; chat-answer: model, first token; ModelCaller: tokens and cost; Dispatcher: queue
 * waits, upstream time, retries, failovers), then turned once into the request's metrics and its
 * log line. A plain mutable object: recording a fact is an assignment, not an Effect.
 */
import type { Tracer } from "effect"
import type { Usage } from "../model/usage.ts"

export interface RequestRecord {
  readonly requestId: string
  /** `performance.now()` at arrival. */
  readonly startedAt: number
  readonly method: string
  readonly path: string
  /** The permission surface (`chat`, `messages`…) or the route family (`admin`, `models`…). */
  surface: string
  /** The key's id (never its secret), once authenticated. */
  keyId: string | undefined
  /** The model as the client named it (alias, handle or id). */
  modelAsked: string | undefined
  /** Its canonical id, once resolved. */
  model: string | undefined
  /** The canonical id of the model that answered (an equivalent after a failover). */
  servedModel: string | undefined
  placement: string | undefined
  stream: boolean | undefined
  status: number
  /** Time waiting for capacity slots, all attempts together. */
  queueWaitMs: number
  /** Time in upstream calls (from each grant to that attempt's end), all attempts together. */
  upstreamMs: number
  /** Time sleeping between retry rounds. */
  backoffMs: number
  /** Arrival to the first event of the answer (every answered chat call). */
  ttftMs: number | undefined
  attempts: number
  retries: number
  failovers: number
  usage: Usage | undefined
  costMicros: number | undefined
  /** A refused or failed request: the error's type and message as the client saw them. */
  error: { readonly type: string; readonly message: string } | undefined
  /** A defect or a failure worth a stack: its pretty cause. */
  cause: string | undefined
  /** The request's GenAI span, when tracing is on (ended with the record). */
  span: Tracer.Span | undefined
}

export const newRequestRecord = (requestId: string, method: string, path: string, startedAt: number): RequestRecord => ({
  requestId,
  startedAt,
  method,
  path,
  surface: "other",
  keyId: undefined,
  modelAsked: undefined,
  model: undefined,
  servedModel: undefined,
  placement: undefined,
  stream: undefined,
  status: 0,
  queueWaitMs: 0,
  upstreamMs: 0,
  backoffMs: 0,
  ttftMs: undefined,
  attempts: 0,
  retries: 0,
  failovers: 0,
  usage: undefined,
  costMicros: undefined,
  error: undefined,
  cause: undefined,
  span: undefined
})
