/**
 * Reads V8's map log (`--log-maps`): which maps of a kind were made, and by which code. Used by
 * `test/runtime-http/generator-closures.test.ts` and `bench/map-sites.ts`.
 *
 * Run a process with `--log-maps --logfile=DIR/maps.log`: V8 writes one log per isolate (the main
 * thread's and each worker's), named `isolate-<address>-<pid>-maps.log`. Do not add
 * `--no-logfile-per-isolate`: then every isolate writes the one file at its own offset, over the
 * others' lines (a 97 MB file of which 56 MB were zeros, and the main thread's maps lost).
 *
 * Lines read:
 *   code-creation,<type>,<kind>,<time>,<address>,<size>,<name…>
 *   map,<kind>,<time>,<from>,<to>,<pc>,<line>,<column>,…,<name>
 */
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"

/**
 * A generator function's first map, and an object turned into a dictionary (an object literal with
 * accessors is one). V8 logs a dictionary's map as `NormalizeCached` when its normalized-map cache
 * had one for the object's map and as `Normalize` when it made one (`Map::Normalize`): the cache is
 * a small table cleared by full collections, so which of the two a site logs depends on the run.
 * Both are counted: counting only `NormalizeCached`, a site that normalizes an object per request
 * showed in the runs where its cache entry survived, and not in the others.
 */
export const MADE_PER_OBJECT = ["InitialMap", "NormalizeCached", "Normalize"] as const

/** The logs in `dir` and their sizes now: where a later `readMapLogs` starts reading each. */
export const mapLogSizes = (dir: string): ReadonlyMap<string, number> =>
  new Map(readdirSync(dir).map((name) => [join(dir, name), statSync(join(dir, name)).size]))

export interface MapsMade {
  /** Maps of the kinds logged before the `from` offsets (all files' together). */
  readonly before: number
  /** Maps of the kinds logged from them (to the `to` offsets), by site: "<kind> <code> (at line:column)" → count. */
  readonly after: ReadonlyMap<string, number>
  /** Their total. */
  readonly afterCount: number
  /** The first log line of each site in the window, as V8 wrote it (for a failure's message). */
  readonly samples: ReadonlyMap<string, string>
}

export interface MapLogWindow {
  /** Where each file's window starts (a file not listed, of a worker started since: at its start). */
  readonly from?: ReadonlyMap<string, number>
  /**
   * Where each file's window ends (a file not listed: at its end). V8 buffers its log, so sizes
   * taken while a process runs lag what it has logged by at most a buffer's worth.
   */
  readonly to?: ReadonlyMap<string, number>
  readonly kinds?: ReadonlyArray<string>
}

/**
 * Counts the maps of `kinds` made in each log of `dir` before and inside the window. Sites name the
 * code that made each map: its function and source position, where the log has it.
 */
export const readMapLogs = (dir: string, { from = new Map(), to = new Map(), kinds = MADE_PER_OBJECT }: MapLogWindow = {}): MapsMade => {
  const prefixes = kinds.map((kind) => `map,${kind},`)
  let before = 0
  let afterCount = 0
  const after = new Map<string, number>()
  const samples = new Map<string, string>()
  for (const file of readdirSync(dir).map((name) => join(dir, name))) {
    const text = readFileSync(file, "latin1")
    const start = from.get(file) ?? 0
    const end = to.get(file) ?? Number.POSITIVE_INFINITY
    // Code objects in the order they were made: an address is reused once its code is collected,
    // so a map is laid on the newest code made before it that covers its pc (a lookup over every
    // code the log ever named, as before, could name a function long gone from that address).
    const codes: Array<readonly [number, number, string]> = []
    const codeAt = (pc: number) => {
      for (let i = codes.length - 1; i >= 0; i--) {
        const [from, to, name] = codes[i]!
        if (from <= pc && pc < to) return name.replace(/file:\/\/\S*?\/(src|node_modules)\//, "$1/")
      }
      return "(unknown code)"
    }
    let offset = 0
    for (const line of text.split("\n")) {
      const at = offset
      offset += line.length + 1
      if (line.startsWith("code-creation,")) {
        const f = line.split(",")
        const address = Number.parseInt(f[4]!, 16)
        codes.push([address, address + Number(f[5]), f.slice(6).join(",").replace(/,0x[0-9a-f]+,.*$/, "").trim()])
      } else if (prefixes.some((prefix) => line.startsWith(prefix))) {
        if (at < start) {
          before++
          continue
        }
        if (at >= end) continue
        const f = line.split(",")
        const named = `${f[1]} ${codeAt(Number.parseInt(f[5]!, 16))} (at ${f[6]}:${f[7]})`
        after.set(named, (after.get(named) ?? 0) + 1)
        if (!samples.has(named)) samples.set(named, line.slice(0, 300))
        afterCount++
      }
    }
  }
  return { before, after, afterCount, samples }
}
