/**
 * Typed access to `xstate/graph`'s adjacency map: every reachable state and every transition
 * under a bounded event set. (The library's types lose the machine's emitted-event type, hence
 * the one cast here.)
 */
import type { AnyStateMachine } from "xstate"
import { getAdjacencyMap } from "xstate/graph"

export interface Edge<S, E> {
  readonly prev: S
  readonly event: E
  readonly next: S
}

export interface Graph<S, E> {
  readonly states: ReadonlyArray<S>
  readonly edges: ReadonlyArray<Edge<S, E>>
  /** Transitions out of a state, by its serialized form. */
  readonly out: (state: S) => ReadonlyArray<Edge<S, E>>
}

export const explore = <S, E>(machine: AnyStateMachine, options: {
  readonly events: (state: S) => ReadonlyArray<E>
  readonly serialize: (state: S) => string
  readonly input: unknown
}): Graph<S, E> => {
  const adjacency = getAdjacencyMap(machine, {
    events: options.events as never,
    serializeState: options.serialize as never,
    input: options.input
  }) as unknown as Record<string, { state: S; transitions: Record<string, { event: E; state: S }> }>
  const outOf = (key: string) =>
    Object.values(adjacency[key].transitions).map(({ event, state }) => ({ prev: adjacency[key].state, event, next: state }))
  return {
    states: Object.values(adjacency).map((entry) => entry.state),
    edges: Object.keys(adjacency).flatMap(outOf),
    out: (state) => outOf(options.serialize(state))
  }
}
