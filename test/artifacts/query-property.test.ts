/**
 * Property: for random rows and random queries, the SQL the compiler produces — run on the real
 * storage layers, embedded PGlite and PostgreSQL — answers exactly what the same query evaluated
 * in plain TypeScript (`query-reference.ts`) answers: the same rows in the same order, the same
 * total. Rows go in through the upload's own parse and batch path.
 */
import fc from "fast-check"
import { Effect, Layer, ManagedRuntime, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import { rmSync } from "node:fs"
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest"
import { ArtifactsRepo } from "../../src/artifacts/artifacts-repo.ts"
import { type ParseHints, parseContent, type ParsedTable } from "../../src/artifacts/parse-content.ts"
import { compileRowQuery } from "../../src/artifacts/query-compiler.ts"
import { checkQuery } from "../../src/artifacts/query-input.ts"
import { evaluate } from "../../src/artifacts/query-reference.ts"
import { piecesOf } from "../../src/artifacts/row-batches.ts"
import { keyColumns } from "../../src/artifacts/row-keys.ts"
import { Settings } from "../../src/config/settings.ts"
import { DatabaseLive } from "../../src/storage/database.ts"
import { embeddedDataDir, freshDataDir, migratedPostgresDatabase } from "../support/engines.ts"

const { postgresUrl } = inject("services")
/** Cases per property; `ARTIFACTS_PROPERTY_RUNS=1000` for a longer soak. */
const RUNS = Number(process.env.ARTIFACTS_PROPERTY_RUNS ?? 60)
const engines = [
  { name: "embedded", make: async () => { const dir = embeddedDataDir(); return { settings: { dataDir: dir, databaseUrl: undefined }, cleanup: async () => rmSync(dir, { recursive: true, force: true }) } } },
  ...(postgresUrl === null ? [] : [{
    name: "postgres",
    make: async () => { const db = await migratedPostgresDatabase(postgresUrl); return { settings: { databaseUrl: Redacted.make(db.url), dataDir: freshDataDir() }, cleanup: db.drop } }
  }])
]

// Small pools, so predicates and rows collide often enough to match.
const STRINGS = ["", "a", "A", "ab", "b", "ä", "Ä", "é", "😀", "z😀", "\uffff", "%", "_", "\\", "\"", "10", "9", "true", "null", "a b"]
const scalar = fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: -3, max: 12 }) },
  { weight: 1, arbitrary: fc.constantFrom(0.5, 1.5, -2.25, 1e21, 5e-324, 123456.789) },
  { weight: 3, arbitrary: fc.constantFrom(...STRINGS) },
  { weight: 1, arbitrary: fc.string({ unit: "grapheme", maxLength: 4 }) },
  { weight: 1, arbitrary: fc.boolean() },
  { weight: 1, arbitrary: fc.constant(null) }
)
const value = fc.oneof(
  { weight: 8, arbitrary: scalar },
  { weight: 1, arbitrary: fc.array(scalar, { maxLength: 3 }) },
  { weight: 1, arbitrary: fc.dictionary(fc.constantFrom("e", "f"), scalar, { maxKeys: 2 }) }
)
const ofKind = (kind: string) =>
  kind === "number"
    ? fc.oneof(fc.integer({ min: -3, max: 12 }), fc.constantFrom(0.5, -2.25, null))
    : kind === "string"
    ? fc.oneof(fc.constantFrom(...STRINGS), fc.constant(null))
    : kind === "boolean"
    ? fc.oneof(fc.boolean(), fc.constant(null))
    : kind === "nested"
    ? fc.oneof(fc.record({ e: scalar }, { requiredKeys: [] }), scalar)
    : value

const FIELDS = ["a", "b", "c", "d", "d.e"]
/** A table: each field gets a kind (one JSON type, or mixed), each row may miss any field. */
const jsonRows = fc.tuple(
  fc.constantFrom("number", "string", "boolean", "mixed"),
  fc.constantFrom("number", "string", "mixed"),
  fc.constantFrom("boolean", "mixed"),
  fc.integer({ min: 0, max: 40 })
).chain(([ka, kb, kc, n]) =>
  fc.array(
    fc.record({ a: ofKind(ka), b: ofKind(kb), c: ofKind(kc), d: ofKind("nested"), "d.e": scalar }, { requiredKeys: [] }),
    { minLength: n, maxLength: n }
  )
)

/** A CSV: cells from texts that type as numbers, booleans or neither. */
const CELLS = ["9", "10", "1.50", "-2", "007", "", "true", "FALSE", "abc", "A b", "x,y", "1e3", "10"]
const csvText = fc.tuple(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 0, max: 30 })).chain(([width, height]) =>
  fc.array(fc.array(fc.constantFrom(...CELLS), { minLength: width, maxLength: width }), { minLength: height, maxLength: height }).map((records) => {
    const quote = (cell: string) => (/[",\n]/.test(cell) ? `"${cell.replaceAll("\"", "\"\"")}"` : cell)
    const header = ["a", "b", "c", "d"].slice(0, width).join(",")
    return [header, ...records.map((r) => r.map(quote).join(","))].join("\n") + "\n"
  })
)

const filterValue = (op: string) =>
  op === "in"
    ? fc.array(scalar, { maxLength: 4 })
    : op === "exists"
    ? fc.option(fc.boolean(), { nil: undefined })
    : op === "lt" || op === "lte" || op === "gt" || op === "gte"
    ? fc.oneof(fc.integer({ min: -3, max: 12 }), fc.constantFrom(0.5, ...STRINGS))
    : value

const field = fc.constantFrom(...FIELDS, "zz")
const predicate = fc.constantFrom("eq", "ne", "lt", "lte", "gt", "gte", "contains", "in", "exists").chain((op) =>
  fc.record({ field, op: fc.constant(op), value: filterValue(op) }, { requiredKeys: op === "exists" ? ["field", "op"] : ["field", "op", "value"] })
)
const query = (rowCount: number) =>
  fc.record({
    filter: fc.array(predicate, { maxLength: 3 }),
    sort: fc.array(fc.record({ field, dir: fc.constantFrom("asc", "desc") }), { maxLength: 3 }),
    search: fc.constantFrom("a", "ä", "1", "\"a\"", "true", "null", "😀", ":", "e\":"),
    select: fc.subarray([...FIELDS, "zz"]),
    offset: fc.integer({ min: 0, max: 5 }),
    limit: fc.integer({ min: 0, max: 8 }),
    range: fc.oneof(
      fc.record({ rowStart: fc.integer({ min: 0, max: rowCount + 1 }) }, { requiredKeys: [] }),
      fc.tuple(fc.integer({ min: 0, max: rowCount + 1 }), fc.integer({ min: 0, max: 3 })).map(([rowStart, span]) => ({ rowStart, rowEnd: rowStart + span }))
    ),
    original: fc.boolean()
  }, { requiredKeys: [] })

// Number columns and the predicates the row keys answer (`row-keys.ts`), so that plan is exercised.
const NUMBERS = [-3, -2.25, 0, 0.5, 1, 2, 5, 9, 10, 12, 1e21, 5e-324]
const number = fc.oneof({ weight: 6, arbitrary: fc.constantFrom(...NUMBERS) }, { weight: 1, arbitrary: fc.constant(null) })
const numberRows = fc.integer({ min: 0, max: 40 }).chain((n) =>
  fc.array(fc.record({ a: number, b: number, c: fc.constantFrom(...STRINGS) }, { requiredKeys: [] }), { minLength: n, maxLength: n })
)
const numberPredicate = fc.constantFrom("eq", "ne", "lt", "lte", "gt", "gte", "in", "exists").chain((op) =>
  fc.record({
    field: fc.constantFrom("a", "b"),
    op: fc.constant(op),
    value: op === "in" ? fc.array(fc.constantFrom(...NUMBERS), { maxLength: 4 }) : op === "exists" ? fc.boolean() : fc.constantFrom(...NUMBERS)
  })
)
const numberQuery = (rowCount: number) =>
  fc.record({
    filter: fc.array(numberPredicate, { maxLength: 3 }),
    sort: fc.array(fc.record({ field: fc.constantFrom("a", "b"), dir: fc.constantFrom("asc", "desc") }), { maxLength: 2 }),
    search: fc.constantFrom("1", "2", "a", "e+", "null"),
    select: fc.subarray(["a", "b", "c"]),
    offset: fc.integer({ min: 0, max: 5 }),
    limit: fc.integer({ min: 0, max: 8 }),
    range: fc.record({ rowStart: fc.integer({ min: 0, max: rowCount + 1 }) }, { requiredKeys: [] })
  }, { requiredKeys: [] })

for (const engine of engines) {
  describe(`artifact queries: SQL equals TypeScript (${engine.name})`, () => {
    let runtime: ManagedRuntime.ManagedRuntime<ArtifactsRepo, unknown>
    let cleanup: () => Promise<void>
    beforeAll(async () => {
      const made = await engine.make()
      cleanup = made.cleanup
      runtime = ManagedRuntime.make(ArtifactsRepo.layer.pipe(Layer.provideMerge(DatabaseLive), Layer.provide(Settings.layerWith(made.settings))))
      await runtime.runPromise(Effect.void)
    })
    afterAll(async () => {
      await runtime?.dispose()
      await cleanup?.()
    })

    /** Stores the content through the upload's parse and batch path; returns its id. */
    const store = async (text: string, hints: ParseHints) => {
      const parsed = parseContent(text, Buffer.byteLength(text), hints)
      if (parsed.kind !== "table") throw new Error("expected a table")
      const id = await runtime.runPromise(Effect.gen(function*() {
        const repo = yield* ArtifactsRepo
        const id = yield* repo.createPending("key_property", randomBytes(8).toString("hex"), Buffer.byteLength(text), parsed.format, parsed.shape)
        // Tiny batches, so multi-batch row numbering is exercised too.
        for (const piece of piecesOf(parsed, new Uint8Array(0), 64)) {
          if (piece.kind === "rows") yield* repo.insertPiece(id, piece)
        }
        return id
      }))
      return { id, table: parsed as ParsedTable }
    }

    /** Queries answered by the row-keys plan (a statement scanning the search rows alone). */
    let byKeys = 0
    const compare = async (contentId: string, table: ParsedTable, body: unknown) => {
      const checked = checkQuery(body, { structured: true, columns: table.shape.columns })
      if (!checked.ok || checked.value.kind !== "rows") throw new Error(`generated an invalid query: ${JSON.stringify(body)}`)
      const q = checked.value
      const expected = evaluate(table.rows, q, table.originals)
      // Both plans: with the row keys the upload wrote, and as for a content stored without them.
      for (const keys of [keyColumns(table.shape.columns), undefined]) {
        const compiled = compileRowQuery({ contentId, rowCount: table.shape.rowCount, columns: table.shape.columns, allColumnsListed: true, keyColumns: keys }, q)
        const [page, count] = await runtime.runPromise(Effect.gen(function*() {
          const repo = yield* ArtifactsRepo
          const page = compiled.page === undefined ? [] : yield* repo.run<{ row: string }>(compiled.page)
          const count = compiled.count === undefined ? compiled.knownTotal! : (yield* repo.run<{ total: number }>(compiled.count))[0].total
          return [page, count] as const
        }))
        if ([compiled.page, compiled.count].some((s) => s?.text.includes("FROM artifact_row_search s WHERE") && s.text.includes("s.nums["))) byKeys++
        const got = { rows: page.map((r) => JSON.parse(r.row)), totalMatched: count }
        expect(got, `${JSON.stringify(body)} (row keys: ${keys !== undefined})`).toEqual({ rows: expected.rows, totalMatched: expected.totalMatched })
      }
    }

    it("JSON rows of every type, nested fields and missing values", async () => {
      await fc.assert(
        fc.asyncProperty(jsonRows.chain((rows) => fc.tuple(fc.constant(rows), fc.array(query(rows.length), { minLength: 1, maxLength: 6 }))), async ([rows, queries]) => {
          const { id, table } = await store(JSON.stringify(rows), { format: "json" })
          for (const q of queries) await compare(id, table, q)
        }),
        { numRuns: RUNS }
      )
    }, 120_000)

    it("number columns, filtered and sorted through the row keys", async () => {
      byKeys = 0
      await fc.assert(
        fc.asyncProperty(numberRows.chain((rows) => fc.tuple(fc.constant(rows), fc.array(numberQuery(rows.length), { minLength: 1, maxLength: 6 }))), async ([rows, queries]) => {
          const { id, table } = await store(JSON.stringify(rows), { format: "json" })
          for (const q of queries) await compare(id, table, q)
        }),
        { numRuns: RUNS }
      )
      // The plan under test ran (most of these queries filter or sort number columns).
      expect(byKeys).toBeGreaterThan(RUNS)
    }, 120_000)

    it("CSV rows with typed columns and original cell text", async () => {
      await fc.assert(
        fc.asyncProperty(csvText.chain((text) => fc.tuple(fc.constant(text), fc.array(query(40), { minLength: 1, maxLength: 6 }))), async ([text, queries]) => {
          const { id, table } = await store(text, { format: "csv" })
          for (const q of queries) await compare(id, table, q)
        }),
        { numRuns: Math.ceil(RUNS * 2 / 3) }
      )
    }, 120_000)
  })
}
