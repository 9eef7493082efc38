/**
 * The server's process runs with glibc's malloc set to give memory back: two arenas
 * (`MALLOC_ARENA_MAX=2`) and fixed trim and mmap thresholds (`GLIBC_TUNABLES`).
 *
 * glibc gives a thread that allocates while another holds an arena an arena of its own, up to
 * eight per core, and keeps what is freed in each for reuse rather than giving it back to the
 * system. A gateway has a dozen threads that allocate natively (the main thread, V8's compiler
 * and collector threads, the embedded database's thread compiling PGlite's WASM, libuv's pool),
 * and start-up's bursts leave ~35 MiB free but resident in their arenas for good: an `npm start`
 * that fell quiet held 227–235 MiB RSS, against 189–197 with two arenas (same data dir, after the
 * quiet trim, four starts each).
 *
 * glibc also raises its mmap threshold after a large block is freed (up to 32 MiB), and its trim
 * threshold to twice that, so after a burst large buffers come from the heap and the heap's free
 * top stays resident. Both are held at glibc's own starting value, 128 KiB (setting them turns
 * the raising off): the streams benchmark's gateway, quiet after start 182 → 170 MiB, quiet after
 * 3,000 streams 210 → 201 MiB (`npm run bench -- --quick --only=streams`, one run each).
 *
 * Neither costs measurable CPU on the request path (`bench/hot-path.ts`, alternated pairs: two
 * arenas 1,760–2,120 against 2,225–2,270 µs per request; the thresholds 1,980–2,070 against
 * 1,965–2,085, streamed 2,988–3,150 against 2,900–3,200), since nearly every allocation there is
 * the main thread's V8 heap, not malloc.
 *
 * The variables are read once, when the C library starts, so `serve` sets them by replacing its
 * own process (`process.execve`: same pid, same standard streams; ~0.05–0.2 s) before anything
 * else starts. An operator who set `MALLOC_ARENA_MAX` or `GLIBC_TUNABLES` (any value) manages the
 * allocator: nothing is changed. Elsewhere than Linux nothing happens (other C libraries do not
 * read them, and the call is only on POSIX systems).
 */
const ALLOCATOR_SETTINGS = {
  MALLOC_ARENA_MAX: "2",
  GLIBC_TUNABLES: "glibc.malloc.trim_threshold=131072:glibc.malloc.mmap_threshold=131072"
}

/** Replaces this process with itself under the allocator settings above, unless it has its own. */
export const applyMallocSettings = (): void => {
  if (process.platform !== "linux" || process.execve === undefined) return
  if (process.env.MALLOC_ARENA_MAX !== undefined || process.env.GLIBC_TUNABLES !== undefined) return
  try {
    process.execve(process.execPath, [process.execPath, ...process.execArgv, ...process.argv.slice(1)], {
      ...process.env,
      ...ALLOCATOR_SETTINGS
    })
  } catch {
    // Not replaced (the binary moved, a seccomp filter refused execve): this process serves as it
    // is, with glibc's defaults — more memory, nothing else changes.
  }
}
