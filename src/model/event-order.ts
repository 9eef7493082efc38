/**
 * Checks a recorded event sequence against the backend contract written in `events.ts`.
 * Backends' tests use it; encoders may rely on every rule it checks.
 */
import type { BlockStart, CanonicalEvent } from "./events.ts"

const deltaBlockTypes: Record<string, ReadonlyArray<BlockStart["type"]>> = {
  text_delta: ["text"],
  thinking_delta: ["thinking"],
  signature_delta: ["thinking"],
  tool_input_delta: ["tool_use"]
}

/** The first broken rule, described for a test failure message; `undefined` when all hold. */
export const eventOrderViolation = (events: ReadonlyArray<CanonicalEvent>): string | undefined => {
  if (events[0]?.type !== "message_start") return "the first event must be message_start"
  let nextIndex = 0
  let open: { index: number; type: BlockStart["type"] } | undefined
  let stopped = false
  for (let position = 1; position < events.length; position++) {
    const event = events[position]
    const at = `event ${position} (${event.type})`
    if (stopped) return `${at} comes after message_stop`
    switch (event.type) {
      case "message_start":
        return `${at}: a second message_start`
      case "block_start":
        if (open !== undefined) return `${at}: block ${open.index} is still open`
        if (event.index !== nextIndex) return `${at}: expected index ${nextIndex}, got ${event.index}`
        open = { index: event.index, type: event.block.type }
        nextIndex++
        break
      case "block_stop":
        if (open?.index !== event.index) return `${at}: block ${event.index} is not the open block`
        open = undefined
        break
      case "message_stop":
        if (open !== undefined) return `${at}: block ${open.index} was never stopped`
        stopped = true
        break
      default:
        if (open?.index !== event.index) return `${at}: delta for block ${event.index}, which is not open`
        if (!deltaBlockTypes[event.type].includes(open.type)) return `${at}: not allowed in a ${open.type} block`
    }
  }
  return stopped ? undefined : "the stream has no message_stop"
}
