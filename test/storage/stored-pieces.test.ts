/**
 * `storedPieces` (src/storage/stored-pieces.ts) on both engines: a row's documents come back as
 * rows of at most STORED_PIECE_BYTES that join to the exact bytes, whatever the size (at, just
 * under and just over a piece's boundary, and a character cut in two); a null document has no
 * pieces; no row is undefined.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { ConfigFile } from "../../src/config/config-file.ts"
import { defaultConfig } from "../../src/config/default-config.ts"
import { Settings } from "../../src/config/settings.ts"
import { DatabaseLive } from "../../src/storage/database.ts"
import { STORED_PIECE_BYTES, storedPieces } from "../../src/storage/stored-pieces.ts"
import { storageTargets } from "../support/engines.ts"

for (const target of storageTargets()) {
  describe(`storedPieces (${target.name})`, () => {
    it.live("reads a row's documents in pieces that join to the exact bytes", () =>
      Effect.acquireUseRelease(
        Effect.promise(target.make),
        ({ settings }) =>
          Effect.gen(function*() {
            const sql = yield* SqlClient.SqlClient
            yield* sql`CREATE TEMP TABLE pieces_test (id int PRIMARY KEY, a text, b text)`
            // "é" is two bytes: at an odd offset one sits across a cut.
            const texts = [0, 1, STORED_PIECE_BYTES - 1, STORED_PIECE_BYTES, STORED_PIECE_BYTES + 1, 3 * STORED_PIECE_BYTES + 7]
              .map((bytes) => (bytes % 2 === 1 ? "x" : "") + "é".repeat(Math.floor(bytes / 2)))
            for (const [i, text] of texts.entries()) yield* sql`INSERT INTO pieces_test (id, a, b) VALUES (${i}, ${text}, NULL)`
            for (const [i, text] of texts.entries()) {
              const pieces = yield* storedPieces(sql, sql`SELECT convert_to(a, 'UTF8') AS a, convert_to(b, 'UTF8') AS b FROM pieces_test WHERE id = ${i}`, ["a", "b"])
              const a = pieces?.get("a") ?? []
              expect(Buffer.concat(a).toString()).toBe(text)
              expect(a.length).toBe(Math.max(1, Math.ceil(Buffer.byteLength(text) / STORED_PIECE_BYTES)))
              expect(Math.max(...a.map((piece) => piece.byteLength))).toBeLessThanOrEqual(STORED_PIECE_BYTES)
              expect(pieces?.has("b")).toBe(false)
            }
            expect(yield* storedPieces(sql, sql`SELECT convert_to(a, 'UTF8') AS a FROM pieces_test WHERE id = -1`, ["a"])).toBeUndefined()
          }).pipe(Effect.provide(DatabaseLive.pipe(
            Layer.provideMerge(ConfigFile.layerWith(defaultConfig)),
            Layer.provideMerge(Settings.layerWith(settings))
          ))),
        ({ cleanup }) => Effect.promise(cleanup)
      ), 60_000)
  })
}
