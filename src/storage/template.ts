/**
 * A new data directory's database, unpacked from a template instead of made by initdb.
 *
 * PGlite's initdb costs ~500 MB of memory for a few seconds: it runs a second, in-memory PGlite,
 * tries shared-memory sizes up to 128 MB in it, then copies the result over as a tar. An empty
 * database is the same bytes every time for a given PGlite build, so `make-template.ts` runs initdb
 * once and keeps the result here, gzipped (`templates/pglite-<version>.tar.gz`, ~4 MB); a first
 * start unpacks it (~40 MB of files) in a fraction of the time and memory. Without a template for
 * the installed PGlite version (after an upgrade, until `make-template.ts` is run), initdb runs as
 * before. Every database made from a template shares its Postgres system identifier, which only
 * replication reads.
 */
import { closeSync, createReadStream, existsSync, mkdirSync, openSync, readFileSync, readdirSync, statSync, writeFileSync, writeSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join, normalize, relative, sep } from "node:path"
import { Worker } from "node:worker_threads"
import { createGunzip, gzipSync } from "node:zlib"

/** The installed `@electric-sql/pglite` version. */
export const pgliteVersion = (): string => {
  const entry = createRequire(import.meta.url).resolve("@electric-sql/pglite")
  let dir = dirname(entry)
  while (!existsSync(join(dir, "package.json"))) dir = dirname(dir)
  return (JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { version: string }).version
}

/** The template for the installed PGlite, if this checkout has one. */
export const templateFile = (): string | undefined => {
  const file = join(import.meta.dirname, "templates", `pglite-${pgliteVersion()}.tar.gz`)
  return existsSync(file) ? file : undefined
}

const BLOCK = 512

const field = (header: Uint8Array, at: number, length: number) => {
  const bytes = header.subarray(at, at + length)
  const end = bytes.indexOf(0)
  return new TextDecoder().decode(end === -1 ? bytes : bytes.subarray(0, end))
}

/**
 * Unpacks a gzipped ustar archive of regular files and directories into `dir`, streaming: file
 * contents go to disk as they are inflated, so memory stays at a few chunks whatever the size
 * (the template inflates to ~40 MB, which would otherwise stay in the heap until a GC).
 */
export const extractTemplate = async (file: string, dir: string) => {
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  let pending: Buffer = Buffer.alloc(0)
  /** The file being written: its descriptor and how many of its bytes are still to come. */
  let current: { fd: number; remaining: number } | undefined
  /** Zero padding after a file's last byte, up to the next 512-byte boundary. */
  let padding = 0
  let ended = false
  for await (const chunk of createReadStream(file).pipe(createGunzip()) as AsyncIterable<Buffer>) {
    if (ended) continue
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk])
    let at = 0
    for (;;) {
      if (current !== undefined) {
        const n = Math.min(current.remaining, pending.length - at)
        if (n > 0) writeSync(current.fd, pending, at, n)
        at += n
        current.remaining -= n
        if (current.remaining > 0) break
        closeSync(current.fd)
        current = undefined
      }
      const skip = Math.min(padding, pending.length - at)
      at += skip
      padding -= skip
      if (padding > 0 || pending.length - at < BLOCK) break
      const header = pending.subarray(at, at + BLOCK)
      at += BLOCK
      if (header.every((byte) => byte === 0)) {
        ended = true
        break
      }
      const prefix = field(header, 345, 155)
      const name = prefix === "" ? field(header, 0, 100) : `${prefix}/${field(header, 0, 100)}`
      const size = Number.parseInt(field(header, 124, 12).trim() || "0", 8)
      const type = header[156]
      const target = normalize(join(dir, name))
      if (relative(dir, target).startsWith("..")) throw new Error(`template entry outside the data directory: ${name}`)
      if (type === 0x35 /* '5' directory */) mkdirSync(target, { recursive: true, mode: 0o700 })
      else if (type === 0x30 /* '0' file */ || type === 0) {
        mkdirSync(dirname(target), { recursive: true, mode: 0o700 })
        current = { fd: openSync(target, "w", 0o600), remaining: size }
        padding = (BLOCK - (size % BLOCK)) % BLOCK
      } else throw new Error(`template entry of unsupported type ${String.fromCharCode(type ?? 0)}: ${name}`)
    }
    pending = Buffer.from(pending.subarray(at))
  }
  if (current !== undefined) {
    closeSync(current.fd)
    throw new Error(`template ${file} ends inside a file`)
  }
}

/**
 * `extractTemplate` in a short-lived thread (`unpack-worker.ts`). On the main thread its inflated
 * chunks (~40 MB in 16 KiB buffers, freed only by a later garbage collection) left 22–26 MB of
 * the process's malloc heap resident for good, interleaved with what start-up allocates meanwhile;
 * a thread's buffers are freed together when it ends.
 */
export const unpackTemplate = (file: string, dir: string) =>
  new Promise<void>((resolve, reject) => {
    const worker = new Worker(new URL("./unpack-worker.ts", import.meta.url), { workerData: { file, dir } })
    let outcome: { readonly done: true } | { readonly error: string } | undefined
    worker.once("message", (message: { readonly done: true } | { readonly error: string }) => {
      outcome = message
    })
    worker.once("error", (error) => {
      outcome ??= { error: error.message }
    })
    worker.once("exit", (code) => {
      if (outcome !== undefined && "done" in outcome) resolve()
      else reject(new Error(outcome?.error ?? `the unpacking thread exited with code ${code}`))
    })
  })

const octal = (value: number, length: number) => value.toString(8).padStart(length - 1, "0")

const header = (name: string, size: number, directory: boolean) => {
  const block = new Uint8Array(BLOCK)
  const put = (text: string, at: number) => block.set(new TextEncoder().encode(text), at)
  if (Buffer.byteLength(name) > 100) throw new Error(`template path too long for ustar: ${name}`)
  put(name, 0)
  put(octal(directory ? 0o700 : 0o600, 8), 100)
  put(octal(0, 8), 108)
  put(octal(0, 8), 116)
  put(octal(size, 12), 124)
  put(octal(0, 12), 136) // mtime: none, so the same database packs to the same bytes
  put("        ", 148) // checksum field counts as spaces while summing
  block[156] = directory ? 0x35 : 0x30
  put("ustar\u000000", 257)
  let sum = 0
  for (const byte of block) sum += byte
  put(`${octal(sum, 7)}\u0000`, 148)
  return block
}

/** Packs the files under `dir` (sorted, so the archive is deterministic) into a gzipped ustar file. */
export const writeTemplate = (dir: string, file: string) => {
  const parts: Array<Uint8Array> = []
  const walk = (path: string) => {
    for (const entry of readdirSync(path).sort()) {
      const full = join(path, entry)
      const name = relative(dir, full).split(sep).join("/")
      if (statSync(full).isDirectory()) {
        parts.push(header(`${name}/`, 0, true))
        walk(full)
      } else {
        const data = readFileSync(full)
        parts.push(header(name, data.length, false), data, new Uint8Array((BLOCK - (data.length % BLOCK)) % BLOCK))
      }
    }
  }
  walk(dir)
  parts.push(new Uint8Array(BLOCK * 2))
  mkdirSync(dirname(file), { recursive: true })
  writeFileSync(file, gzipSync(Buffer.concat(parts), { level: 9 }))
}
