/**
 * The lifecycle of one agent run, as a pure XState machine over the run's own event log: every
 * event appended to the log (by the service or by the caller) is sent to the machine, in `seq`
 * order, inside the transaction that appends it. So the status a GET shows, the status the list
 * filters on, and the state an instance rebuilds after a crash all come from one fold of the log —
 * they cannot disagree. The host (src/runs/run-actor.ts) reads the state to decide what to do next
 * (start a step, re-run an open step, wait for tool results, write the outcome); it never decides
 * a status itself.
 *
 * States (→ the run's `status`):
 * - `open`            (`running`) a bookkeeping run (no `model` + `input`): the caller drives it and
 *                     ends it by appending an `outcome` event (or by cancelling).
 * - `ready`           (`running`) executable, no step open: the host starts the next step.
 * - `inNode`          (`running`) a `node.started` without its `node.completed`. After a crash the
 *                     new owner re-runs this step under the same node id (at-least-once).
 * - `requiresAction`  (`requires_action`) the last step called the run's tools; it waits until a
 *                     `tool.result` event answered every call, then goes back to `ready`.
 * - `finishing`       (`running`) the run's answer is decided (`decided`); the host writes it as
 *                     the `outcome` event.
 * - `completed`, `failed`, `cancelled`, `incomplete` — final, entered only by an `outcome` event
 *                     whose `status` names it. An `outcome` is accepted in every non-final state
 *                     (execution error, cancel, budget stop); nothing is accepted after one.
 *
 * Step results (`node.completed`): `tool_use` with calls → `requiresAction`; `max_tokens` →
 * decided `incomplete` (reason `max_output_tokens`); anything else → decided `completed`. When the
 * run has used `maxTurns` steps and would need another, it is decided `incomplete` (`max_turns`).
 */
import { and, assign, initialTransition, setup, type SnapshotFrom, transition } from "xstate"

export const TERMINAL_STATUSES = ["completed", "failed", "cancelled", "incomplete"] as const
export type TerminalStatus = typeof TERMINAL_STATUSES[number]
export type RunStatus = "running" | "requires_action" | TerminalStatus

const DEFAULT_MAX_TURNS = 32

interface PendingToolCall {
  readonly id: string
  readonly name: string
  readonly input: unknown
}

/** The outcome the log must end with, once decided. */
export interface Decision {
  readonly status: TerminalStatus
  readonly reason: string | null
}

export interface RunMachineInput {
  readonly executable: boolean
  readonly maxTurns?: number
}

export interface RunContext {
  readonly executable: boolean
  readonly maxTurns: number
  /** Steps started so far (the next step is node number `nodes`). */
  readonly nodes: number
  readonly openNode: string | null
  /** Tool calls of the last step still waiting for a `tool.result`. */
  readonly pending: ReadonlyArray<PendingToolCall>
  readonly decided: Decision | null
  readonly outcome: Decision | null
}

/** The log events the machine reads; any other event type (caller events) leaves it unchanged. */
export type RunEvent =
  | { readonly type: "node.started"; readonly nodeId: string }
  | { readonly type: "node.completed"; readonly nodeId: string; readonly stopReason: string; readonly toolCalls?: ReadonlyArray<PendingToolCall> }
  | { readonly type: "tool.result"; readonly toolUseId: string }
  | { readonly type: "outcome"; readonly status: TerminalStatus; readonly reason?: string | null }

const isCompletion = (event: RunEvent): event is Extract<RunEvent, { type: "node.completed" }> => event.type === "node.completed"

const decide = (status: TerminalStatus, reason: string | null): Decision => ({ status, reason })

export const runMachine = setup({
  types: {
    context: {} as RunContext,
    events: {} as RunEvent,
    input: {} as RunMachineInput
  },
  guards: {
    executable: ({ context }) => context.executable,
    live: ({ context }) => context.outcome === null,
    closesOpenNode: ({ context, event }) => isCompletion(event) && event.nodeId === context.openNode,
    callsTools: ({ event }) => isCompletion(event) && event.stopReason === "tool_use" && (event.toolCalls?.length ?? 0) > 0,
    hitCeiling: ({ event }) => isCompletion(event) && event.stopReason === "max_tokens",
    answersPending: ({ context, event }) => event.type === "tool.result" && context.pending.some((call) => call.id === event.toolUseId),
    turnsLeft: ({ context }) => context.nodes < context.maxTurns,
    othersPending: ({ context, event }) => event.type === "tool.result" && context.pending.some((call) => call.id !== event.toolUseId)
  },
  actions: {
    openNode: assign(({ context, event }) => ({
      nodes: context.nodes + 1,
      openNode: event.type === "node.started" ? event.nodeId : context.openNode
    })),
    closeNode: assign({ openNode: null }),
    awaitTools: assign(({ event }) => ({ pending: isCompletion(event) ? event.toolCalls ?? [] : [] })),
    answer: assign(({ context, event }) => ({
      pending: event.type === "tool.result" ? context.pending.filter((call) => call.id !== event.toolUseId) : context.pending
    })),
    decide: assign((_, decision: Decision) => ({ decided: decision })),
    end: assign(({ event }) => ({
      outcome: event.type === "outcome" ? decide(event.status, event.reason ?? null) : null,
      openNode: null,
      pending: []
    }))
  }
}).createMachine({
  id: "run",
  context: ({ input }) => ({
    executable: input.executable,
    maxTurns: input.maxTurns ?? DEFAULT_MAX_TURNS,
    nodes: 0,
    openNode: null,
    pending: [],
    decided: null,
    outcome: null
  }),
  initial: "start",
  // An outcome ends the run from any non-final state, with the status it names. (The handler sits
  // on the root, which is never final itself: `live` keeps a second outcome from moving a finished run.)
  on: {
    outcome: [
      { guard: ({ context, event }) => context.outcome === null && event.status === "completed", target: ".completed", actions: "end" },
      { guard: ({ context, event }) => context.outcome === null && event.status === "failed", target: ".failed", actions: "end" },
      { guard: ({ context, event }) => context.outcome === null && event.status === "cancelled", target: ".cancelled", actions: "end" },
      { guard: "live", target: ".incomplete", actions: "end" }
    ]
  },
  states: {
    start: {
      always: [{ guard: "executable", target: "ready" }, { target: "open" }]
    },
    open: {},
    ready: {
      on: { "node.started": { target: "inNode", actions: "openNode" } }
    },
    inNode: {
      on: {
        "node.completed": [
          { guard: and(["closesOpenNode", "callsTools"]), target: "requiresAction", actions: ["closeNode", "awaitTools"] },
          {
            guard: and(["closesOpenNode", "hitCeiling"]),
            target: "finishing",
            actions: ["closeNode", { type: "decide", params: decide("incomplete", "max_output_tokens") }]
          },
          { guard: "closesOpenNode", target: "finishing", actions: ["closeNode", { type: "decide", params: decide("completed", null) }] }
        ]
      }
    },
    requiresAction: {
      on: {
        "tool.result": [
          { guard: and(["answersPending", "othersPending"]), target: "requiresAction", actions: "answer" },
          { guard: and(["answersPending", "turnsLeft"]), target: "ready", actions: "answer" },
          { guard: "answersPending", target: "finishing", actions: ["answer", { type: "decide", params: decide("incomplete", "max_turns") }] }
        ]
      }
    },
    finishing: {},
    completed: { type: "final" },
    failed: { type: "final" },
    cancelled: { type: "final" },
    incomplete: { type: "final" }
  }
})

export type RunSnapshot = SnapshotFrom<typeof runMachine>
export type RunStateValue = "open" | "ready" | "inNode" | "requiresAction" | "finishing" | TerminalStatus

/** The status a run shows for a machine state. */
export const statusOf = (snapshot: RunSnapshot): RunStatus => {
  const value = snapshot.value as RunStateValue
  if (value === "requiresAction") return "requires_action"
  return (TERMINAL_STATUSES as ReadonlyArray<string>).includes(value) ? value as TerminalStatus : "running"
}

export const isTerminal = (status: string): status is TerminalStatus => (TERMINAL_STATUSES as ReadonlyArray<string>).includes(status)

/** What the runs table stores of the machine: enough to resume the fold without re-reading the log. */
export interface PersistedRun {
  readonly value: RunStateValue
  readonly context: RunContext
}

export const startRun = (input: RunMachineInput): RunSnapshot => initialTransition(runMachine, input)[0]

/** The next state for one log event (events the machine does not read leave it as it is). */
export const stepRun = (snapshot: RunSnapshot, event: RunEvent): RunSnapshot => transition(runMachine, snapshot, event)[0]

export const persistRun = (snapshot: RunSnapshot): PersistedRun => ({ value: snapshot.value as RunStateValue, context: snapshot.context })

export const restoreRun = (persisted: PersistedRun): RunSnapshot => runMachine.resolveState(persisted)

/**
 * A log event (any JSON object with a string `type`) as the machine reads it, or undefined when
 * the machine does not care about it (caller events, `node.retry`, `run.resumed`). The routes
 * refuse an outcome whose `status` is not terminal and store a missing one as `completed`; this
 * fold still reads anything else as `completed`, so no log can leave a run without a status.
 */
export const toRunEvent = (event: { readonly type: string; readonly [field: string]: unknown }): RunEvent | undefined => {
  switch (event.type) {
    case "node.started":
      return typeof event.nodeId === "string" ? { type: "node.started", nodeId: event.nodeId } : undefined
    case "node.completed":
      return typeof event.nodeId === "string"
        ? {
          type: "node.completed",
          nodeId: event.nodeId,
          stopReason: typeof event.stopReason === "string" ? event.stopReason : "end_turn",
          toolCalls: Array.isArray(event.toolCalls) ? event.toolCalls as ReadonlyArray<PendingToolCall> : []
        }
        : undefined
    case "tool.result":
      return typeof event.toolUseId === "string" ? { type: "tool.result", toolUseId: event.toolUseId } : undefined
    case "outcome":
      return {
        type: "outcome",
        status: typeof event.status === "string" && isTerminal(event.status) ? event.status : "completed",
        reason: typeof event.reason === "string" ? event.reason : null
      }
    default:
      return undefined
  }
}
