/**
 * The process-wide WASM tier-up rule (src/storage/embedded-thread.ts): only function index
 * LLHTTP_PARSER_FUNCTION_INDEX may be optimized. That must be undici's HTTP parser loop (its largest
 * function, in both builds undici may load) and must be an import in PGlite's module, so none of
 * PGlite is optimized. An upgrade of either package that breaks this fails here.
 */
import { readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { LLHTTP_PARSER_FUNCTION_INDEX } from "../../src/storage/embedded-thread.ts"

/** Imported function count and body sizes of defined functions, from a module's binary. */
const functionsOf = (bytes: Uint8Array<ArrayBuffer>) => {
  let at = 8
  const leb = () => {
    let result = 0
    let shift = 0
    let byte: number
    do {
      byte = bytes[at++]!
      result += (byte & 0x7f) * 2 ** shift
      shift += 7
    } while (byte & 0x80)
    return result
  }
  const imported = WebAssembly.Module.imports(new WebAssembly.Module(bytes)).filter((i) => i.kind === "function").length
  const bodySizes: number[] = []
  while (at < bytes.length) {
    const id = bytes[at++]
    const size = leb()
    const end = at + size
    if (id === 10) {
      const count = leb()
      for (let i = 0; i < count; i++) {
        const body = leb()
        bodySizes.push(body)
        at += body
      }
    }
    at = end
  }
  return { imported, bodySizes }
}

const requireHere = createRequire(import.meta.url)

describe("WASM tier-up rule", () => {
  it("lets undici's HTTP parser loop be optimized, in both of its builds", () => {
    const undiciDir = join(requireHere.resolve("undici"), "..")
    for (const build of ["llhttp-wasm.js", "llhttp_simd-wasm.js"]) {
      const { imported, bodySizes } = functionsOf(new Uint8Array(requireHere(join(undiciDir, "lib", "llhttp", build)) as Buffer<ArrayBuffer>))
      const largest = imported + bodySizes.indexOf(Math.max(...bodySizes))
      expect(largest, build).toBe(LLHTTP_PARSER_FUNCTION_INDEX)
    }
  })

  it("optimizes nothing in PGlite: that index is one of its imports", () => {
    const pgliteDist = join(requireHere.resolve("@electric-sql/pglite"), "..")
    const { imported } = functionsOf(new Uint8Array(readFileSync(join(pgliteDist, "pglite.wasm"))))
    expect(imported).toBeGreaterThan(LLHTTP_PARSER_FUNCTION_INDEX)
  })
})
