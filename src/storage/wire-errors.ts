/**
 * What the embedded database's answers say, read from their wire bytes in its thread
 * (`embedded-worker.ts`) without parsing them: PostgreSQL's protocol frames each message as a type
 * byte and an int32 length (counting itself), and an ErrorResponse (`E`) as fields, each a type
 * byte and a NUL-ended string, ended by a NUL.
 */

/** The big-endian unsigned int32 at `at`. */
export const int32 = (bytes: Uint8Array, at: number) =>
  ((bytes[at]! << 24) | (bytes[at + 1]! << 16) | (bytes[at + 2]! << 8) | bytes[at + 3]!) >>> 0

const ERROR_RESPONSE = 0x45 // 'E'
const CODE_FIELD = 0x43 // 'C'
/** SQLSTATE 53100, as the bytes of an ErrorResponse's code field. */
const DISK_FULL = new TextEncoder().encode("53100\0")

/**
 * Whether an answer holds an ErrorResponse whose SQLSTATE is 53100 (disk full). Walks the
 * messages' headers (type byte, int32 length), reading only an error's fields.
 */
export const refusedForDiskFull = (answer: Uint8Array): boolean => {
  for (let at = 0; at + 5 <= answer.length; at += 1 + int32(answer, at + 1)) {
    if (answer[at] !== ERROR_RESPONSE) continue
    const end = Math.min(answer.length, at + 1 + int32(answer, at + 1))
    for (let field = at + 5; field < end && answer[field] !== 0;) {
      const valueEnd = answer.indexOf(0, field + 1)
      if (valueEnd < 0 || valueEnd >= end) break
      // A pipelined batch may hold several errors (one per Sync): another code does not end the walk.
      if (answer[field] === CODE_FIELD) {
        if (valueEnd - field === DISK_FULL.length && DISK_FULL.every((byte, i) => answer[field + 1 + i] === byte)) return true
        break
      }
      field = valueEnd + 1
    }
  }
  return false
}

