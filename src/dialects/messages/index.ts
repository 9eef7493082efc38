/** Placeholder: the messages dialect is being written (see ../dialect.ts for the contract). */
import { Effect } from "effect"
import { NotImplemented } from "../../errors.ts"
import type { ChatDialect } from "../dialect.ts"

export const messagesDialect: ChatDialect<unknown> = {
  surface: "messages",
  newId: () => "placeholder",
  decode: () => Effect.die(new NotImplemented({ message: "messages dialect not written yet" })),
  encodeResponse: () => ({}),
  streamEncoder: () => ({ event: () => "", error: () => "", keepalive: () => "", switchover: () => "" })
}
