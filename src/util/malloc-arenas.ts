/**
 * The server's process runs with glibc's malloc limited to two arenas (`MALLOC_ARENA_MAX=2`).
 *
 * glibc gives a thread that allocates while another holds an arena an arena of its own, up to
 * eight per core, and keeps what is freed in each for reuse rather than giving it back to the
 * system. A gateway has a dozen threads that allocate natively (the main thread, V8's compiler
 * and collector threads, the embedded database's thread compiling PGlite's WASM, libuv's pool),
 * and start-up's bursts leave ~35 MiB free but resident in their arenas for good: an `npm start`
 * that fell quiet held 227–235 MiB RSS, against 189–197 with two arenas (same data dir, after the
 * quiet trim, four starts each). Two arenas cost no measurable CPU on the request path
 * (`bench/hot-path.ts --env MALLOC_ARENA_MAX=2`, three alternated pairs: 1,760–2,120 against
 * 2,225–2,270 µs per request on a noisy VM), since nearly every allocation there is the main
 * thread's V8 heap, not malloc. It is the setting container guides give Node and Java servers.
 *
 * The variable is read once, when the C library starts, so `serve` sets it by replacing its own
 * process (`process.execve`: same pid, same standard streams; ~0.05–0.2 s) before anything else
 * starts.
 * An operator who set `MALLOC_ARENA_MAX` (any value) keeps theirs; elsewhere than Linux nothing
 * happens (other C libraries do not read it, and the call is only on POSIX systems).
 */
const ARENAS = "2"

/** Replaces this process with itself under `MALLOC_ARENA_MAX=2`, unless it already has a setting. */
export const limitMallocArenas = (): void => {
  if (process.platform !== "linux" || process.env.MALLOC_ARENA_MAX !== undefined || process.execve === undefined) return
  try {
    process.execve(process.execPath, [process.execPath, ...process.execArgv, ...process.argv.slice(1)], {
      ...process.env,
      MALLOC_ARENA_MAX: ARENAS
    })
  } catch {
    // Not replaced (the binary moved, a seccomp filter refused execve): this process serves as it
    // is, with glibc's default arenas — more memory, nothing else changes.
  }
}
