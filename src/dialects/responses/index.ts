/** Placeholder: the responses dialect is being written (see ../dialect.ts for the contract). */
import { Effect } from "effect"
import { NotImplemented } from "../../errors.ts"
import type { ChatDialect } from "../dialect.ts"

export const responsesDialect: ChatDialect<unknown> = {
  surface: "responses",
  newId: () => "placeholder",
  decode: () => Effect.die(new NotImplemented({ message: "responses dialect not written yet" })),
  encodeResponse: () => ({}),
  streamEncoder: () => ({ event: () => "", error: () => "", keepalive: () => "", switchover: () => "" })
}
