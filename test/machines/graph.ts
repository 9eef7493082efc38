/**
 * Typed access to `xstate/graph`'s adjacency map: every reachable state and every transition
 * under a bounded event set. (The library's types lose the machine's emitted-event type, hence
 * the one cast here.)
 */
import type { AnyActorLogic } from "xstate"
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

/**
 * `logic` is an XState machine (states are its snapshots) or transition logic made with
 * `fromTransition` (states are the snapshots' `context`, i.e. the reducer's own state).
 */
export const explore = <S, E>(logic: AnyActorLogic, options: {
  readonly events: (state: S) => ReadonlyArray<E>
  readonly serialize: (state: S) => string
  readonly input: unknown
}): Graph<S, E> => {
  const isMachine = "states" in logic
  const unwrap = (snapshot: any): S => (isMachine ? snapshot : snapshot.context)
  const raw = getAdjacencyMap(logic, {
    events: ((snapshot: unknown) => options.events(unwrap(snapshot))) as never,
    serializeState: ((snapshot: unknown) => options.serialize(unwrap(snapshot))) as never,
    input: options.input
  }) as unknown as Record<string, { state: unknown; transitions: Record<string, { event: E; state: unknown }> }>
  const adjacency = Object.fromEntries(Object.entries(raw).map(([key, entry]) => [key, {
    state: unwrap(entry.state),
    transitions: Object.fromEntries(Object.entries(entry.transitions).map(([k, t]) => [k, { event: t.event, state: unwrap(t.state) }]))
  }]))
  const outOf = (key: string) =>
    Object.values(adjacency[key].transitions).map(({ event, state }) => ({ prev: adjacency[key].state, event, next: state }))
  return {
    states: Object.values(adjacency).map((entry) => entry.state),
    edges: Object.keys(adjacency).flatMap(outOf),
    out: (state) => outOf(options.serialize(state))
  }
}
