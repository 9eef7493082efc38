/** Placeholder: the completions dialect is being written (see ../dialect.ts for the contract). */
import { Effect } from "effect"
import { NotImplemented } from "../../errors.ts"
import type { ChatDialect } from "../dialect.ts"

export const completionsDialect: ChatDialect<unknown> = {
  surface: "completions",
  newId: () => "placeholder",
  decode: () => Effect.die(new NotImplemented({ message: "completions dialect not written yet" })),
  encodeResponse: () => ({}),
  streamEncoder: () => ({ event: () => "", error: () => "", keepalive: () => "", switchover: () => "" })
}
