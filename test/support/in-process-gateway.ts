/**
 * The real server (`ServerLive`, what `gateway serve` runs) started inside the test's own process,
 * for suites whose subject is what the gateway answers, not the process that runs it: a child
 * process costs ~1 s of CPU to start on this 2-core machine (loading ~750 modules, the tokenizer's
 * tables, V8 compiling everything again) and then runs the request path cold, where an in-process
 * gateway reuses the worker's loaded modules, warm code and tokenizer thread. The network is still
 * real: the server listens on a port and the tests call it over HTTP with the official clients.
 *
 * What a process has of its own is given to each gateway instead, so gateways in one worker never
 * see each other: the settings come from the given environment only (a `ConfigProvider` over it,
 * not `process.env`), the metrics registry is the gateway's own, and the console and log lines
 * are captured into `output()` (what a process would print on stdout and stderr).
 *
 * Suites about the process itself (signals, exit codes, a crash, a restart after SIGKILL, the
 * command line, stdout) start a child process with `startGateway` (gateway-process.ts).
 */
import { ConfigProvider, Console, Effect, Exit, Fiber, Layer, Metric } from "effect"
import { format } from "node:util"
import { Settings } from "../../src/config/settings.ts"
import { ServerLive } from "../../src/gateway.ts"
import { LogLineSink } from "../../src/observability/json-logger.ts"
import { type GatewayHandle, gatewayHandle } from "./gateway-process.ts"

/** A console whose every method appends a line to `write` (the gateway prints with log and error). */
export const capturingConsole = (write: (line: string) => void): Console.Console => {
  const line = (...args: ReadonlyArray<unknown>) => write(`${format(...args)}\n`)
  const nothing = () => {}
  return {
    assert: (condition, ...args) => (condition ? undefined : line("Assertion failed:", ...args)),
    clear: nothing, count: nothing, countReset: nothing, group: nothing, groupCollapsed: nothing, groupEnd: nothing,
    time: nothing, timeEnd: nothing, timeLog: nothing, table: line, dir: line, dirxml: line,
    debug: line, error: line, info: line, log: line, trace: line, warn: line
  }
}

/** Starts the server in this process on a free port with the given environment; resolves once it listens. */
export const startInProcessGateway = async (env: Record<string, string>): Promise<GatewayHandle> => {
  // No memory trim (util/heap-trim.ts) unless a test asks: it would collect the test worker's
  // heap, which holds every gateway and test of the worker, not a gateway's own.
  const environment: Record<string, string> = { HOST: "127.0.0.1", PORT: "0", GATEWAY_IDLE_TRIM_MS: "0", ...env }
  let output = ""
  let listening: (baseUrl: string) => void = () => {}
  const listened = new Promise<string>((resolve) => (listening = resolve))
  const write = (text: string) => {
    output += text
    const m = /gateway listening on (http:\/\/\S+)/.exec(text)
    if (m) listening(m[1])
  }
  const server = ServerLive.pipe(
    Layer.provide(Settings.layerWith({ lookupEnv: (name) => environment[name] })),
    Layer.provide(Layer.mergeAll(
      ConfigProvider.layer(ConfigProvider.fromEnv({ env: environment })),
      Layer.succeed(Metric.MetricRegistry)(new Map()),
      Layer.succeed(LogLineSink)(write),
      Layer.succeed(Console.Console)(capturingConsole(write))
    ))
  )
  const fiber = Effect.runFork(Layer.launch(server))
  const exited = new Promise<Exit.Exit<never, unknown>>((resolve) => fiber.addObserver(resolve))
  const baseUrl = await Promise.race([
    listened,
    exited.then((exit) => {
      throw new Error(`in-process gateway stopped before listening: ${Exit.isFailure(exit) ? String(exit.cause) : "no failure"}\n${output}`)
    })
  ])
  // A graceful stop, as SIGTERM is for a process: the listener closes, in-flight requests finish.
  return gatewayHandle(baseUrl, env, () => output, async () => {
    await Effect.runPromise(Fiber.interrupt(fiber))
    return 0
  })
}
