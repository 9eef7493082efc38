/**
 * The template a new data dir's database is unpacked from (src/storage/template.ts): there is one
 * for the installed PGlite, and packing then unpacking gives back the same files.
 */
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { extractTemplate, pgliteVersion, templateFile, unpackTemplate, writeTemplate } from "../../src/storage/template.ts"
import { freshDataDir } from "../support/engines.ts"

describe("embedded database template", () => {
  it("exists for the installed PGlite (after an upgrade: node src/storage/make-template.ts)", async () => {
    expect(templateFile(), `no template for PGlite ${pgliteVersion()}`).toMatch(new RegExp(`pglite-${pgliteVersion().replaceAll(".", "\\.")}\\.tar\\.gz$`))
    const unpacked = freshDataDir()
    try {
      await extractTemplate(templateFile()!, join(unpacked, "db"))
      expect(readFileSync(join(unpacked, "db", "PG_VERSION"), "utf8").trim()).toMatch(/^\d+$/)
      expect(readdirSync(join(unpacked, "db"))).toEqual(expect.arrayContaining(["base", "global", "pg_wal", "postgresql.conf"]))
    } finally {
      rmSync(unpacked, { recursive: true, force: true })
    }
  })

  it("packs a directory tree and unpacks the same bytes, empty files and directories included", async () => {
    const dir = freshDataDir()
    try {
      const source = join(dir, "source")
      mkdirSync(join(source, "base", "1"), { recursive: true })
      mkdirSync(join(source, "pg_tblspc"))
      writeFileSync(join(source, "PG_VERSION"), "17\n")
      writeFileSync(join(source, "base", "1", "empty"), "")
      const big = Buffer.alloc(8192 * 3 + 7, 0)
      for (let i = 0; i < big.length; i++) big[i] = (i * 31) % 251
      writeFileSync(join(source, "base", "1", "1259"), big)
      writeTemplate(source, join(dir, "t.tar.gz"))
      await extractTemplate(join(dir, "t.tar.gz"), join(dir, "out"))
      expect(readFileSync(join(dir, "out", "PG_VERSION"), "utf8")).toBe("17\n")
      expect(readFileSync(join(dir, "out", "base", "1", "empty")).length).toBe(0)
      expect(readFileSync(join(dir, "out", "base", "1", "1259")).equals(big)).toBe(true)
      expect(readdirSync(join(dir, "out", "pg_tblspc"))).toEqual([])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("unpacks in a thread of its own, and reports a broken archive as an error", async () => {
    const dir = freshDataDir()
    try {
      await unpackTemplate(templateFile()!, join(dir, "db"))
      expect(readFileSync(join(dir, "db", "PG_VERSION"), "utf8").trim()).toMatch(/^\d+$/)
      writeFileSync(join(dir, "broken.tar.gz"), "not a gzip stream")
      await expect(unpackTemplate(join(dir, "broken.tar.gz"), join(dir, "out"))).rejects.toThrow(/header/i)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
