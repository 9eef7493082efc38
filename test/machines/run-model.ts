/** The bounded event set the model-based tests walk the run machine with. */
import type { RunEvent, RunSnapshot } from "../../machines/run.ts"
import { TERMINAL_STATUSES } from "../../machines/run.ts"

export const calls = [{ id: "t1", name: "lookup", input: {} }, { id: "t2", name: "fetch", input: { q: 1 } }]
export const input = { executable: true, maxTurns: 2 }

/** Events a log can hold at this point: steps by node id, tool results, every outcome. */
export const runEvents = (snapshot: RunSnapshot): Array<RunEvent> => {
  const next = `n${snapshot.context.nodes + 1}`
  const open = snapshot.context.openNode ?? "n0"
  return [
    { type: "node.started", nodeId: next },
    { type: "node.completed", nodeId: open, stopReason: "end_turn" },
    { type: "node.completed", nodeId: open, stopReason: "max_tokens" },
    { type: "node.completed", nodeId: open, stopReason: "tool_use", toolCalls: calls },
    { type: "node.completed", nodeId: "stranger", stopReason: "end_turn" },
    { type: "tool.result", toolUseId: "t1" },
    { type: "tool.result", toolUseId: "t2" },
    { type: "tool.result", toolUseId: "nope" },
    ...TERMINAL_STATUSES.map((status) => ({ type: "outcome", status, reason: "r" }) as const)
  ]
}
export const serialize = (s: RunSnapshot) => JSON.stringify({ value: s.value, context: s.context })
