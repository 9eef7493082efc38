/**
 * Reads a Server-Sent Events stream with `fetch`. `EventSource` cannot listen to event types it
 * does not know in advance, and a run's log has caller-defined types; this reader hands every
 * frame over, whatever its `event:` name.
 */
export interface SseFrame {
  readonly id: string | undefined
  readonly event: string
  readonly data: string
}

export const readSse = async (url: string, onFrame: (frame: SseFrame) => void, signal: AbortSignal, onOpen: () => void = () => {}) => {
  const response = await fetch(url, { headers: { accept: "text/event-stream" }, credentials: "same-origin", signal })
  if (!response.ok || response.body === null) {
    let message = `The gateway answered ${response.status}`
    try {
      message = ((await response.json()) as { error?: { message?: string } }).error?.message ?? message
    } catch {
      // not JSON
    }
    throw Object.assign(new Error(message), { status: response.status })
  }
  onOpen()
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
  let buffer = ""
  while (true) {
    const { value, done } = await reader.read()
    if (done) return
    buffer += value
    let end: number
    while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const block = buffer.slice(0, end)
      buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, "")
      let id: string | undefined
      let event = "message"
      const data: Array<string> = []
      for (const line of block.split(/\r?\n/)) {
        if (line.startsWith(":")) continue
        const colon = line.indexOf(":")
        const field = colon < 0 ? line : line.slice(0, colon)
        const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "")
        if (field === "id") id = text
        else if (field === "event") event = text
        else if (field === "data") data.push(text)
      }
      if (data.length > 0) onFrame({ id, event, data: data.join("\n") })
    }
  }
}
