/**
 * How many turns the event loop took while `work` ran: a work that holds the loop from start to
 * end lets none (or one) go by; one that yields between slices lets several. A work that yields n
 * times is seen to take n turns or n - 1: in the turn it ends in, its callback may run before the
 * counter's or after it (both are immediates; their order in that turn is not ours to fix).
 */
export const loopTurnsDuring = async <A>(work: () => Promise<A>): Promise<{ readonly value: A; readonly turns: number }> => {
  let turns = 0
  let running = true
  const tick = () => {
    turns++
    if (running) setImmediate(tick)
  }
  setImmediate(tick)
  try {
    return { value: await work(), turns }
  } finally {
    running = false
  }
}

/** Runs a sliced pass (a generator that pauses with `yield`) to its end: its result and how often it offered a pause. */
export const pausesOf = <A>(steps: Iterator<unknown, A>): { readonly value: A; readonly pauses: number } => {
  for (let pauses = 0; ; pauses++) {
    const step = steps.next()
    if (step.done === true) return { value: step.value, pauses }
  }
}
