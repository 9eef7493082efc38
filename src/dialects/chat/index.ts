/** Placeholder: the chat dialect is being written (see ../dialect.ts for the contract). */
import { Effect } from "effect"
import { NotImplemented } from "../../errors.ts"
import type { ChatDialect } from "../dialect.ts"

export const chatDialect: ChatDialect<unknown> = {
  surface: "chat",
  newId: () => "placeholder",
  decode: () => Effect.die(new NotImplemented({ message: "chat dialect not written yet" })),
  encodeResponse: () => ({}),
  streamEncoder: () => ({ event: () => "", error: () => "", keepalive: () => "", switchover: () => "" })
}
