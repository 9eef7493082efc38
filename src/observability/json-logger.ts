/**
 * The process's logger: one JSON object per line on stdout, through Effect's `Logger`, so every
 * `Effect.log*` in the gateway (the request log, storage failures, defects with their cause) comes
 * out in one shape a log shipper (Loki, Elasticsearch, Datadog) reads without a parser:
 *
 *   {"time":"…","level":"info","msg":"request","request_id":"req_…", …}
 *   {"time":"…","level":"error","msg":"request failed with a defect","cause":"Error: … at …"}
 *
 * A message that is a `LogFields` object (the request log) is spread into the line; anything else
 * becomes `msg` (several parts joined by spaces; a non-string part as JSON). Log annotations are
 * added as fields. Lines are buffered and written together every 100 ms (or at 64 KiB, or at
 * exit): a write to a pipe wakes its reader, and one per request cost tens of µs (measured in
 * bench/observability.ts); a crash (SIGKILL) loses at most the last 100 ms of lines.
 *
 * The request log's fields wait as they are and are serialized when their lines are written, not
 * when logged: a request's own path (its answer written, the next request of its connection
 * waiting behind it) no longer pays for its line, and serializing a batch of lines one after
 * another runs on warm caches where one line per request ran cold (perf, 200 req/s, slow VM:
 * `fieldsLine` 24 µs of self time per request). So a `LogFields`' values must not change once
 * logged: the request log builds them fresh (telemetry.ts).
 */
import { Cause, Context, Logger, References } from "effect"
import { writeSync } from "node:fs"

/** A message whose fields become the log line's own fields (serialized when the line is written: see above). */
export class LogFields {
  readonly msg: string
  readonly fields: Readonly<Record<string, unknown>>
  constructor(msg: string, fields: Readonly<Record<string, unknown>>) {
    this.msg = msg
    this.fields = fields
  }
  /** Another logger (a program embedding the gateway keeps its own) prints the same fields. */
  toJSON() {
    return { msg: this.msg, ...this.fields }
  }
}

/** How long lines wait to be written together, and how much text (or how many lines) forces a write at once. */
const FLUSH_MS = 100
const FLUSH_BYTES = 64 * 1024
const FLUSH_LINES = 256
/** The longest line written (characters); a longer one is cut to its head: one request must not write megabytes. */
const MAX_LINE = 32 * 1024

const LEVELS: Record<string, string> = { Fatal: "fatal", Error: "error", Warn: "warn", Info: "info", Debug: "debug", Trace: "trace" }

const partText = (part: unknown): string => {
  if (typeof part === "string") return part
  if (part instanceof Error) return part.message
  try {
    return JSON.stringify(part) ?? String(part)
  } catch {
    return String(part)
  }
}

const isEmpty = (record: Readonly<Record<string, unknown>>) => {
  for (const _ in record) return false
  return true
}

/**
 * `{"time":…,"level":…,"msg":…,<fields>}` from the fields' own JSON; undefined when they cannot be
 * serialized (the general path then says so). A field named `time`, `level` or `msg` comes after
 * the line's own and wins in a JSON reader, as the general path's spread does.
 */
const fieldsLine = (date: Date, level: string, log: LogFields): string | undefined => {
  let fields: string | undefined
  try {
    fields = JSON.stringify(log.fields)
  } catch {
    return undefined
  }
  if (fields === undefined || !fields.startsWith("{")) return undefined
  const head = `{"time":"${date.toISOString()}","level":${JSON.stringify(level)},"msg":${JSON.stringify(log.msg)}`
  return fields === "{}" ? `${head}}` : `${head},${fields.slice(1)}`
}

/** Where lines go: stdout by default (tests pass a sink). */
export type LineSink = (text: string) => void

/**
 * The most log text left waiting for the reader of stdout. A write to a pipe, a socket or a
 * terminal whose reader has stalled (a log shipper that hung, `gateway serve | less` paused) is
 * kept in memory by node until it is read, without limit: at 200 requests a second that was
 * ~80 KB a second, for as long as the reader stalled. Past this much unread text, lines are
 * dropped and counted, and once the reader has caught up one line says how many.
 */
const MAX_UNREAD_LOG_BYTES = 8 * 1024 * 1024

const countLines = (text: string) => {
  let lines = 0
  for (let at = text.indexOf("\n"); at !== -1; at = text.indexOf("\n", at + 1)) lines++
  return lines
}

/** Writes to `stream`, dropping (and then reporting) what would leave more than `maxUnread` bytes unread. */
export const streamSink = (stream: NodeJS.WritableStream & { readonly writableLength: number }, maxUnread = MAX_UNREAD_LOG_BYTES): LineSink => {
  let dropped = 0
  const report = () => {
    const lines = dropped
    dropped = 0
    stream.write(`${JSON.stringify({ time: new Date().toISOString(), level: "warn", msg: "log lines dropped: stdout was not read", dropped_lines: lines })}\n`)
  }
  return (text) => {
    if (stream.writableLength < maxUnread) {
      stream.write(text)
      return
    }
    // A full buffer has refused a write already, so the stream says when it is empty again.
    if (dropped === 0) stream.once("drain", report)
    dropped += countLines(text)
  }
}

let stdout: LineSink | undefined
const stdoutSink: LineSink = (text) => (stdout ??= streamSink(process.stdout))(text)

/**
 * Where the `serve` process's log lines go: stdout, unless a program running the server inside
 * itself (the test harness's in-process gateways) provides a sink of its own.
 */
export const LogLineSink = Context.Reference<LineSink>("gateway/observability/LogLineSink", { defaultValue: () => stdoutSink })

/** The general path's line: every field spread, annotations added, the cause pretty-printed, cut to MAX_LINE. */
const generalLine = (
  date: Date,
  level: string,
  parts: ReadonlyArray<unknown>,
  annotations: Readonly<Record<string, unknown>>,
  cause: Cause.Cause<unknown>
): string => {
  let line: Record<string, unknown>
  if (parts.length === 1 && parts[0] instanceof LogFields) {
    line = { time: date.toISOString(), level, msg: parts[0].msg, ...parts[0].fields }
  } else {
    line = { time: date.toISOString(), level, msg: parts.map(partText).join(" ") }
  }
  for (const key in annotations) line[key] = annotations[key]
  if (cause.reasons.length > 0) line.cause = Cause.pretty(cause)
  else {
    // `Effect.logError("storage failure", error)`: the error's own chain, with its stack.
    const error = parts.find((part): part is Error => part instanceof Error)
    if (error !== undefined) line.cause = Cause.pretty(Cause.fail(error))
  }
  let text: string
  try {
    text = JSON.stringify(line)
  } catch {
    text = JSON.stringify({ time: line.time, level: line.level, msg: String(line.msg), note: "fields not serializable" })
  }
  if (text.length > MAX_LINE) {
    // A message that quotes a huge input: keep the line's start, say how long it was.
    text = JSON.stringify({ time: line.time, level: line.level, msg: String(line.msg).slice(0, 2_000), truncated: text.length, head: text.slice(0, MAX_LINE / 2) })
  }
  return text
}

/** A request log line waiting to be serialized. */
interface PendingFields {
  readonly date: Date
  readonly level: string
  readonly log: LogFields
}

const NO_ANNOTATIONS: Readonly<Record<string, unknown>> = {}

const serialized = (line: string | PendingFields): string => {
  if (typeof line === "string") return line
  const text = fieldsLine(line.date, line.level, line.log)
  return text !== undefined && text.length <= MAX_LINE ? text : generalLine(line.date, line.level, [line.log], NO_ANNOTATIONS, Cause.empty)
}

export const makeJsonLogger = (sink: LineSink = stdoutSink) => {
  // Lines in order: text, or a request log's fields still to serialize.
  let pending: Array<string | PendingFields> = []
  let pendingChars = 0
  let scheduled = false
  /**
   * The text of the first waiting lines, in order, serialized until `maxChars` of it are taken:
   * 256 waiting lines of a few KiB each (failed requests quote their path and error) must not be
   * serialized in one turn. What is left waits for the next.
   */
  const take = (maxChars: number): string => {
    let text = ""
    let taken = 0
    while (taken < pending.length && text.length < maxChars) text += `${serialized(pending[taken++]!)}\n`
    pending = taken === pending.length ? [] : pending.slice(taken)
    pendingChars = 0
    for (const line of pending) if (typeof line === "string") pendingChars += line.length
    return text
  }
  const flush = () => {
    scheduled = false
    if (pending.length === 0) return
    sink(take(FLUSH_BYTES))
    if (pending.length > 0) {
      scheduled = true
      setImmediate(flush).unref()
    }
  }
  // Whatever is still buffered when the process exits (a crash after a log) is written at once —
  // unless stdout's reader has gone (EPIPE): those lines are lost, the exit code is not.
  if (sink === stdoutSink) {
    process.once("exit", () => {
      try {
        if (pending.length > 0) writeSync(1, take(Number.POSITIVE_INFINITY))
      } catch {
        // Nowhere to write them.
      }
    })
  }
  const append = (line: string | PendingFields) => {
    pending.push(line)
    if (typeof line === "string") pendingChars += line.length
    if (pendingChars >= FLUSH_BYTES || pending.length >= FLUSH_LINES) flush()
    else if (!scheduled) {
      scheduled = true
      setTimeout(flush, FLUSH_MS).unref()
    }
  }
  return Logger.make<unknown, void>(({ cause, date, fiber, logLevel, message }) => {
    const parts = Array.isArray(message) ? message : [message]
    const annotations = fiber.getRef(References.CurrentLogAnnotations)
    const level = LEVELS[logLevel] ?? logLevel
    // The request log (fields, no annotations, no cause), once per request: its fields wait as they
    // are, serialized when written behind the line's own three, not first copied into a new object.
    if (parts.length === 1 && parts[0] instanceof LogFields && cause.reasons.length === 0 && isEmpty(annotations)) {
      return append({ date, level, log: parts[0] })
    }
    append(generalLine(date, level, parts, annotations, cause))
  })
}
