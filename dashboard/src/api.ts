/**
 * Talking to the gateway's dashboard API (`/dashboard/api/*`). The session cookie rides along by
 * itself (same origin, HttpOnly: this code never sees it); every change carries the session's
 * CSRF token in `x-csrf-token`. Errors come back in the gateway's flat shape
 * `{error:{type, message}}` and are thrown as `ApiError` with that message.
 */

export interface Session {
  readonly role: "operator" | "key"
  readonly key: { readonly id: string; readonly name: string | null; readonly hint: string; readonly plan: string } | null
  readonly csrfToken: string
  readonly expiresAt: string
  readonly features: { readonly artifacts: boolean; readonly batches: boolean }
  readonly metering: boolean
}

export class ApiError extends Error {
  readonly status: number
  readonly type: string
  constructor(status: number, type: string, message: string) {
    super(message)
    this.status = status
    this.type = type
  }
}

let csrfToken = ""
let onSignedOut: (reason: string) => void = () => {}

/** Called by the app shell: the token for changes, and what to do when the session ends. */
export const configureApi = (options: { csrfToken: string; onSignedOut: (reason: string) => void }) => {
  csrfToken = options.csrfToken
  onSignedOut = options.onSignedOut
}

const UNREACHABLE = "Cannot reach the gateway. Check that it is running and that this machine can reach it, then try again."

export const api = async <T>(path: string, init: { method?: string; body?: unknown; quiet401?: boolean } = {}): Promise<T> => {
  const method = init.method ?? "GET"
  const headers: Record<string, string> = { accept: "application/json" }
  if (init.body !== undefined) headers["content-type"] = "application/json"
  if (method !== "GET") headers["x-csrf-token"] = csrfToken
  let response: Response
  try {
    response = await fetch(`/dashboard/api${path}`, {
      method,
      headers,
      credentials: "same-origin",
      ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) })
    })
  } catch {
    throw new ApiError(0, "network", UNREACHABLE)
  }
  if (response.ok) return (await response.json()) as T
  let type = "api_error"
  let message = `The gateway answered ${response.status} ${response.statusText}. Try again; if it persists, check the gateway's log.`
  try {
    const body = (await response.json()) as { error?: { type?: string; message?: string } }
    if (body.error?.message) message = body.error.message
    if (body.error?.type) type = body.error.type
  } catch {
    // not JSON: keep the generic message
  }
  if (response.status === 401 && init.quiet401 !== true) onSignedOut(message)
  throw new ApiError(response.status, type, message)
}

export const messageOf = (error: unknown) =>
  error instanceof Error ? error.message : "Something went wrong; try again."

// ---- the shapes the API answers ----

export interface AllowanceView {
  readonly kind: "monthly" | "credits"
  readonly limitUsd: string | null
  readonly usedUsd: string
  readonly remainingUsd: string
  readonly month: string | null
}

export interface KeyView {
  readonly id: string
  readonly name: string | null
  readonly plan: string
  readonly permissions: { readonly surfaces: ReadonlyArray<string> | null; readonly models: ReadonlyArray<string> | null }
  readonly hint: string
  readonly createdAt: string
  readonly revokedAt: string | null
  readonly revoked: boolean
  readonly allowance?: AllowanceView | null
}

export interface PlanView {
  readonly name: string
  readonly allowanceUsd: number
  readonly rpm: number
  readonly tpm: number
  readonly concurrency: number
  readonly prepaid: boolean
}

export interface Totals {
  readonly requests: number
  readonly inputTokens: number
  readonly outputTokens: number
  readonly cachedInputTokens: number
  readonly reasoningTokens: number
  readonly costUsd: string
}

export interface UsageReport {
  readonly month: string
  readonly keyId: string | null
  readonly days: ReadonlyArray<string>
  readonly daily: ReadonlyArray<Totals & { readonly day: string; readonly model: string }>
  readonly byModel: ReadonlyArray<Totals & { readonly model: string }>
  readonly byKey: ReadonlyArray<Totals & {
    readonly keyId: string
    readonly name: string | null
    readonly hint: string
    readonly plan: string
    readonly revoked: boolean
    readonly allowance: AllowanceView | null
  }>
  readonly totals: Totals
}

export interface QueueView {
  readonly placementId: string
  readonly modelId: string | null
  readonly backend: string | null
  readonly capacity: number
  readonly inUse: number
  readonly waiting: number
  readonly waitingByKey: ReadonlyArray<{ readonly keyId: string; readonly name: string | null; readonly hint: string | null; readonly waiting: number }>
  readonly circuit: "closed" | "open" | "half_open"
  readonly fault: { readonly mode: string; readonly status?: number; readonly rate?: number } | null
}

export interface RunView {
  readonly id: string
  readonly keyId: string
  /** Operators' lists name the key. */
  readonly key?: { readonly name: string | null; readonly hint: string | null }
  readonly status: string
  readonly executable: boolean
  readonly model: string | null
  readonly usage: { readonly inputTokens: number; readonly outputTokens: number; readonly costUsd: string | number }
  readonly lastSeq: number
  readonly outcome: { readonly status: string; readonly reason: string | null } | null
  readonly parentRunId: string | null
  readonly createdAt: string
  readonly updatedAt: string
  readonly finishedAt: string | null
}

export interface RunPage {
  readonly data: ReadonlyArray<RunView>
  readonly hasMore: boolean
  readonly nextCursor: string | null
}

export interface ModelView {
  readonly id: string
  readonly kind: "chat" | "embedding"
  readonly display_name: string
  readonly aliases: ReadonlyArray<string>
  readonly tier: string
  readonly context_window: number
  readonly max_output: number | null
  readonly capabilities: { readonly tools: boolean; readonly reasoning: boolean; readonly vision: boolean; readonly documents: boolean }
  readonly pricing_usd_per_mtok: { readonly input: number; readonly output: number; readonly cached_input: number | null }
  readonly dimensions?: number
  readonly allowed: boolean
}

export interface MyKey {
  readonly key: KeyView
  readonly plan: PlanView | null
  readonly allowance: AllowanceView | null
  readonly rateLimits: {
    readonly requestsPerMinute: { readonly limit: number; readonly remaining: number; readonly resetMs: number }
    readonly tokensPerMinute: { readonly limit: number; readonly remaining: number; readonly resetMs: number }
    readonly concurrency: { readonly limit: number; readonly inFlight: number }
  } | null
}

export interface ArtifactListItem {
  readonly id: string
  readonly keyId: string
  readonly key: { readonly name: string | null; readonly hint: string | null }
  readonly headVersion: number
  readonly versionCount: number
  readonly kind: "table" | "text"
  readonly rowCount: number | null
  readonly sizeBytes: number
  readonly mimeType: string
  readonly format: string
  readonly summary: string | null
  readonly createdAt: string
  readonly updatedAt: string
}

export interface ArtifactPage {
  readonly data: ReadonlyArray<ArtifactListItem>
  readonly hasMore: boolean
  readonly nextCursor: string | null
}

export type ArtifactShape =
  | {
    readonly kind: "table"
    readonly rowCount: number
    readonly columns: ReadonlyArray<{ readonly name: string; readonly type: string }>
    readonly columnCount: number
    readonly rowsPath?: string
  }
  | { readonly kind: "text"; readonly length: number; readonly characters: number; readonly lines: number }

/** `GET /v1/artifacts/{id}`'s descriptor, as the dashboard gets it with the owning key. */
export interface ArtifactDetail {
  readonly keyId: string
  readonly key: { readonly name: string | null; readonly hint: string | null }
  readonly descriptor: {
    readonly artifactId: string
    readonly version: number
    readonly headVersion: number
    readonly versionCount: number
    readonly versions: ReadonlyArray<{ readonly version: number; readonly sizeBytes: number; readonly contentHash: string; readonly createdAt: string }>
    readonly sizeBytes: number
    readonly contentHash: string
    readonly mimeType: string
    readonly format: string
    readonly shape: ArtifactShape
    readonly summary: string | null
    readonly source: string
    readonly provenance: { readonly method: string; readonly lossless: boolean }
    readonly declaredRowCount: number | null
    readonly createdAt: string
  }
}

/** `POST /v1/artifacts/{id}/query`'s answer. */
export interface ArtifactQueryResult {
  readonly result: {
    readonly artifactId: string
    readonly version: number
    readonly rows?: ReadonlyArray<Record<string, unknown>>
    readonly text?: string
    readonly totalMatched: number
    readonly truncated: boolean
    readonly structured: boolean
    readonly range?: { readonly byteStart: number; readonly byteEnd: number }
  }
}

export interface BatchListItem {
  readonly id: string
  readonly kind: "messages" | "openai"
  readonly keyId: string
  readonly key: { readonly name: string | null; readonly hint: string | null }
  readonly endpoint: string
  readonly status: string
  readonly ended: boolean
  readonly total: number
  readonly counts: { readonly processing: number; readonly succeeded: number; readonly errored: number; readonly canceled: number; readonly expired: number }
  readonly createdAt: string
  readonly endedAt: string | null
  readonly expiresAt: string
  readonly cancelInitiatedAt: string | null
}

export interface BatchPage {
  readonly data: ReadonlyArray<BatchListItem>
  readonly hasMore: boolean
  readonly nextCursor: string | null
}

export interface BatchDetail extends BatchListItem {
  readonly inputFileId: string | null
  readonly outputFileId: string | null
  readonly errorFileId: string | null
  readonly resultsPath: string | null
  readonly metadata: unknown
  readonly errors: unknown
}
