/**
 * Files (OpenAI `/v1/files`): uploads, and the output and error files batches write. Scoped to
 * the key: another key's file id is 404 everywhere. Content is stored in chunks of at most 1 MiB
 * (`file_chunks`, cut by `util/byte-chunks.ts`), so no row nears what the SQL client reads at once; a file is written with its
 * chunks in one transaction, so a listed file always has all its content.
 */
import { Context, Effect, Layer, Schedule } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { Settings } from "../config/settings.ts"
import { InvalidRequest, NotFound } from "../errors.ts"
import { storageDeadlines } from "../storage/deadline.ts"
import { byteLengthOf, chunksOf } from "../util/byte-chunks.ts"
import { randomBase62 } from "../util/ids.ts"

export const FILE_CHUNK_BYTES = 1024 * 1024

/** The file object as OpenAI returns it (and the `openai` SDK parses it). */
export interface FileObject {
  readonly id: string
  readonly object: "file"
  readonly bytes: number
  readonly created_at: number
  readonly expires_at: number | null
  readonly filename: string
  readonly purpose: string
  readonly status: "processed"
  readonly status_details: null
}

export interface NewFile {
  readonly filename: string
  readonly purpose: string
  /** The bytes, whole or as the pieces they arrived in (an upload's: never joined into one buffer). */
  readonly content: Uint8Array | ReadonlyArray<Uint8Array>
  readonly expiresAt?: Date | null
}

export interface FilePage {
  readonly object: "list"
  readonly data: ReadonlyArray<FileObject>
  readonly first_id: string | null
  readonly last_id: string | null
  readonly has_more: boolean
}

interface FileRow {
  readonly id: string
  readonly filename: string
  readonly purpose: string
  readonly bytes: string | number
  readonly created_at: Date
  readonly expires_at: Date | null
}

const seconds = (date: Date) => Math.floor(date.getTime() / 1000)

const toFile = (row: FileRow): FileObject => ({
  id: row.id,
  object: "file",
  bytes: Number(row.bytes),
  created_at: seconds(row.created_at),
  expires_at: row.expires_at === null ? null : seconds(row.expires_at),
  filename: row.filename,
  purpose: row.purpose,
  status: "processed",
  status_details: null
})

const newFileId = () => `file-${randomBase62(16)}`

const notFound = (id: string) => new NotFound({ kind: "resource", message: `No such File object: ${id}`, param: "id" })

/** Writes a file and its chunks with the given client (inside the caller's transaction, if any). */
export const insertFile = Effect.fnUntraced(function*(sql: SqlClient.SqlClient, keyId: string, file: NewFile) {
  const id = newFileId()
  const rows = yield* sql<FileRow>`INSERT INTO files (id, key_id, filename, purpose, bytes, expires_at)
    VALUES (${id}, ${keyId}, ${file.filename}, ${file.purpose}, ${byteLengthOf(file.content)}, ${file.expiresAt ?? null})
    RETURNING id, filename, purpose, bytes, created_at, expires_at`
  let seq = 0
  for (const chunk of chunksOf(file.content, FILE_CHUNK_BYTES)) {
    yield* sql`INSERT INTO file_chunks (file_id, seq, data) VALUES (${id}, ${seq++}, ${chunk})`
  }
  return toFile(rows[0])
})

export class FilesRepo extends Context.Service<FilesRepo, {
  /** The largest upload (`GATEWAY_FILE_MAX_BYTES`, default 32 MiB); larger ones are 413. */
  readonly maxBytes: number
  create(keyId: string, file: NewFile): Effect.Effect<FileObject, SqlError.SqlError>
  get(keyId: string, id: string): Effect.Effect<FileObject, NotFound | SqlError.SqlError>
  content(keyId: string, id: string): Effect.Effect<{ file: FileObject; content: Uint8Array }, NotFound | SqlError.SqlError>
  list(keyId: string, options: { limit: number; after?: string; order: "asc" | "desc"; purpose?: string }): Effect.Effect<FilePage, InvalidRequest | SqlError.SqlError>
  remove(keyId: string, id: string): Effect.Effect<void, NotFound | SqlError.SqlError>
}>()("gateway/files/FilesRepo") {
  static readonly layer = Layer.effect(FilesRepo, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const maxBytes = (yield* Settings).fileMaxBytes
    // An expired file reads as absent at once (the sweeper deletes it later).
    const live = sql`(expires_at IS NULL OR expires_at > now())`

    const create = Effect.fn("FilesRepo.create")(function*(keyId: string, file: NewFile) {
      return yield* sql.withTransaction(insertFile(sql, keyId, file))
    })

    const get = Effect.fn("FilesRepo.get")(function*(keyId: string, id: string) {
      const rows = yield* sql<FileRow>`SELECT id, filename, purpose, bytes, created_at, expires_at FROM files
        WHERE id = ${id} AND key_id = ${keyId} AND ${live}`
      if (rows.length === 0) return yield* notFound(id)
      return toFile(rows[0])
    })

    // One chunk per statement: the SQL client decodes a statement's whole result in one turn of the
    // event loop, and all of a 30 MiB file's chunks at once held it ~230 ms on a slow VM (one
    // 1 MiB chunk: a few milliseconds).
    const content = Effect.fn("FilesRepo.content")(function*(keyId: string, id: string) {
      const file = yield* get(keyId, id)
      const out = new Uint8Array(file.bytes)
      let at = 0
      for (let seq = 0; at < file.bytes; seq++) {
        const rows = yield* sql<{ data: Uint8Array }>`SELECT data FROM file_chunks WHERE file_id = ${id} AND seq = ${seq}`
        // Deleted while it was read (its chunks go with it).
        if (rows.length === 0) return yield* notFound(id)
        out.set(rows[0].data, at)
        at += rows[0].data.byteLength
      }
      return { file, content: out }
    })

    const list = Effect.fn("FilesRepo.list")(function*(
      keyId: string,
      options: { limit: number; after?: string; order: "asc" | "desc"; purpose?: string }
    ) {
      const purpose = options.purpose === undefined ? sql`` : sql`AND purpose = ${options.purpose}`
      let cursor = sql``
      if (options.after !== undefined) {
        const at = yield* sql<{ id: string }>`SELECT id FROM files WHERE id = ${options.after} AND key_id = ${keyId}`
        if (at.length === 0) return yield* new InvalidRequest({ message: `after: no file with id ${options.after}`, param: "after" })
        // Compared in SQL: a timestamp read into JS loses its microseconds.
        const at_ = sql`(SELECT created_at, id FROM files WHERE id = ${options.after})`
        cursor = options.order === "desc" ? sql`AND (created_at, id) < ${at_}` : sql`AND (created_at, id) > ${at_}`
      }
      const order = options.order === "desc" ? sql`ORDER BY created_at DESC, id DESC` : sql`ORDER BY created_at, id`
      const rows = yield* sql<FileRow>`SELECT id, filename, purpose, bytes, created_at, expires_at FROM files
        WHERE key_id = ${keyId} AND ${live} ${purpose} ${cursor} ${order} LIMIT ${options.limit + 1}`
      const data = rows.slice(0, options.limit).map(toFile)
      return {
        object: "list" as const,
        data,
        first_id: data[0]?.id ?? null,
        last_id: data[data.length - 1]?.id ?? null,
        has_more: rows.length > options.limit
      }
    })

    const remove = Effect.fn("FilesRepo.remove")(function*(keyId: string, id: string) {
      const rows = yield* sql`DELETE FROM files WHERE id = ${id} AND key_id = ${keyId} RETURNING id`
      if (rows.length === 0) return yield* notFound(id)
    })

    // Expired files are deleted at start and hourly (their chunks cascade).
    yield* Effect.forkScoped(
      sql`DELETE FROM files WHERE expires_at < now()`.pipe(
        Effect.catchCause((cause) => Effect.logWarning("files: sweeping expired files failed", cause)),
        Effect.repeat(Schedule.spaced("1 hour"))
      )
    )

    // Every call is made for a request: none may wait on a stalled database without end. A
    // file's bytes go in and out as a large document's.
    const { read, write } = yield* storageDeadlines
    return FilesRepo.of({
      maxBytes,
      create: (keyId, file) => write(create(keyId, file)),
      get: (keyId, id) => read(get(keyId, id)),
      content: (keyId, id) => write(content(keyId, id)),
      list: (keyId, options) => read(list(keyId, options)),
      remove: (keyId, id) => read(remove(keyId, id))
    })
  }))
}
