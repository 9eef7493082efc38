/**
 * The batch objects as the official APIs return them (and the SDKs parse them): Anthropic's
 * `message_batch` (RFC 3339 times, `processing_status`, `results_url` once ended) and OpenAI's
 * `batch` (Unix seconds, `status`, `request_counts {total, completed, failed}`).
 */
import { messagesStatus, openaiStatus } from "../../machines/batch.ts"
import type { BatchRecord } from "./batches-repo.ts"

const iso = (date: Date | null) => date === null ? null : date.toISOString()
const unix = (date: Date | null) => date === null ? null : Math.floor(date.getTime() / 1000)

/** `origin`: this gateway's origin as the client reached it (results_url is absolute). */
export const messageBatchView = (batch: BatchRecord, origin: string) => {
  const status = messagesStatus(batch.state)
  const { processing, succeeded, errored, canceled, expired } = batch.state.counts
  return {
    id: batch.id,
    type: "message_batch" as const,
    processing_status: status,
    request_counts: { processing, succeeded, errored, canceled, expired },
    created_at: iso(batch.createdAt),
    ended_at: iso(batch.endedAt),
    expires_at: iso(batch.expiresAt),
    cancel_initiated_at: iso(batch.cancelInitiatedAt),
    archived_at: iso(batch.archivedAt),
    results_url: status === "ended" ? `${origin}/v1/messages/batches/${batch.id}/results` : null
  }
}

export const openaiBatchView = (batch: BatchRecord) => {
  const status = openaiStatus(batch.state)
  const ended = (outcome: string) => batch.state.outcome === outcome ? unix(batch.endedAt) : null
  return {
    id: batch.id,
    object: "batch" as const,
    endpoint: batch.endpoint,
    errors: batch.errors ?? null,
    input_file_id: batch.inputFileId,
    completion_window: batch.completionWindow ?? "24h",
    status,
    output_file_id: batch.outputFileId,
    error_file_id: batch.errorFileId,
    created_at: unix(batch.createdAt),
    in_progress_at: unix(batch.inProgressAt),
    expires_at: unix(batch.expiresAt),
    finalizing_at: unix(batch.finalizingAt),
    completed_at: ended("completed"),
    failed_at: ended("failed"),
    expired_at: ended("expired"),
    cancelling_at: unix(batch.cancelInitiatedAt),
    cancelled_at: ended("cancelled"),
    request_counts: {
      total: batch.state.total,
      completed: batch.state.counts.succeeded,
      failed: batch.state.counts.errored
    },
    metadata: batch.metadata ?? null
  }
}
