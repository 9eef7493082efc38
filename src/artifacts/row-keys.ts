/**
 * Row keys: a table's number columns, also stored per row as a `float8[]` (`artifact_row_search.nums`,
 * migration `0010_artifact_row_keys`), so a filter or sort on them reads a narrow row and compares
 * doubles instead of reading a field out of each row's jsonb document (2–4× less per row; see the
 * README, "Artifacts").
 *
 * Which columns: the listed columns of type `number` whose name has no dot (a dotted field name
 * may also read a nested value, which the key would not hold), the first `MAX_KEY_COLUMNS` of them,
 * in column order. The rule is fixed: the upload writes the keys by it and the query compiler reads
 * them by it, from the same shape.
 *
 * A key holds the number, or NULL for a JSON null or a missing field: so only the predicates that
 * treat null and missing alike (and sorts) use it; the compiler knows which (`query-compiler.ts`).
 * JSON numbers are doubles, and so is float8: comparisons agree with the jsonb ones and with
 * TypeScript (`query-reference.ts`).
 */
import type { Column } from "./model.ts"

export const MAX_KEY_COLUMNS = 32

/** The names of the key columns, in key order (index i is `nums[i + 1]` in SQL). */
export const keyColumns = (columns: ReadonlyArray<Column>): ReadonlyArray<string> =>
  columns.filter((c) => c.type === "number" && !c.name.includes(".")).slice(0, MAX_KEY_COLUMNS).map((c) => c.name)

type Row = Readonly<Record<string, unknown>>

/**
 * The keys of a batch of rows, one PostgreSQL array literal per line (`{1,79.19,NULL}`), cast to
 * `float8[]` in SQL. `String(n)` is the shortest text that reads back as the same double, and holds
 * only digits, `.`, `-`, `e` and `+`: nothing to escape.
 */
export const keysLines = (rows: ReadonlyArray<Row>, names: ReadonlyArray<string>): string => {
  const parts: Array<string> = new Array(rows.length)
  for (let r = 0; r < rows.length; r++) {
    const row = rows[r]
    let literal = "{"
    for (let k = 0; k < names.length; k++) {
      // A missing key may read an inherited property (`constructor`), but never a number.
      const value = row[names[k]]
      literal += (k === 0 ? "" : ",") + (typeof value === "number" ? String(value) : "NULL")
    }
    parts[r] = literal + "}"
  }
  return parts.join("\n")
}
