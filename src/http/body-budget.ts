/**
 * The memory that request bodies may hold while they arrive, in all and per key: one per gateway
 * (`http/app.ts`), handed to the handlers on the request's context.
 *
 * A body is held until its end comes: a large one (over `LARGE_BODY_BYTES`) as the state of its
 * parse, a small one as its chunks (`body.ts`). A client may send as slowly as it likes while it
 * keeps moving (the idle timeout counts one pause), so before this, one key's connections — each a
 * 32 MiB body short of its end, then a byte now and then — held ~40 MiB of memory apiece for as
 * long as they trickled: 8 of them +320 MiB, a hundred more than the machine has (and ten thousand
 * small ones ~1.3 GB).
 *
 * A large body's bytes are counted as they arrive, a small one's declared length before it is
 * read (two map updates a request); both are given back when the body has been read (or refused).
 * What would take its key past half the budget refuses that body at once with 429
 * `rate_limit_error` (the key's own doing: other keys are not held up); what would take the whole
 * budget past its size, with 503 (`retry-after: 1`).
 */
import { LimitExceeded, ServiceUnavailable } from "../errors.ts"

const MiB = 1024 * 1024
const mib = (bytes: number) => `${Math.round((bytes / MiB) * 10) / 10} MiB`

export class BodyBudget {
  readonly #total: number
  readonly #perKey: number
  #held = 0
  readonly #byKey = new Map<string, number>()

  /** `totalBytes` in all, half per key; either at least one body of `maxBodyBytes`, so any body allowed can pass. */
  constructor(totalBytes: number, maxBodyBytes: number) {
    this.#total = Math.max(totalBytes, maxBodyBytes)
    this.#perKey = Math.max(Math.floor(totalBytes / 2), maxBodyBytes)
  }

  /** Takes `bytes` more for `key` (`""`: no key, e.g. an admin request), or says why not. */
  take(key: string, bytes: number): LimitExceeded | ServiceUnavailable | undefined {
    const mine = (this.#byKey.get(key) ?? 0) + bytes
    if (mine > this.#perKey) {
      return new LimitExceeded({
        kind: "rate_limit_error",
        message: `Too many request bodies are arriving for this key at once (at most ${mib(this.#perKey)} in flight); send them one after another`,
        retryAfterSeconds: 1
      })
    }
    if (this.#held + bytes > this.#total) {
      return new ServiceUnavailable({ status: 503, message: "The gateway is receiving too many request bodies at once; try again shortly", retryAfterSeconds: 1 })
    }
    this.#held += bytes
    this.#byKey.set(key, mine)
    return undefined
  }

  /** Gives back what `key`'s body took, once it has been read or refused. */
  give(key: string, bytes: number): void {
    if (bytes === 0) return
    this.#held -= bytes
    const left = (this.#byKey.get(key) ?? 0) - bytes
    if (left > 0) this.#byKey.set(key, left)
    else this.#byKey.delete(key)
  }
}
