/**
 * Schema migrations, applied at every start (idempotent; PgMigrator locks its table so several
 * instances starting together apply each migration once). Append new entries; never edit old ones.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const migrations = {
  "0001_keys": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE gateway_meta (
      name text PRIMARY KEY,
      value jsonb NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
    yield* sql`CREATE TABLE api_keys (
      id text PRIMARY KEY,
      key_hash text NOT NULL UNIQUE,
      hint text NOT NULL,
      name text,
      plan text NOT NULL,
      permissions jsonb NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      revoked_at timestamptz
    )`
  }),
  "0002_states": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE states (
      id text PRIMARY KEY,
      key_id text NOT NULL,
      seq bigint NOT NULL,
      value jsonb NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
    yield* sql`CREATE INDEX states_key_idx ON states (key_id)`
  }),
  "0003_stored_responses": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE stored_responses (
      id text PRIMARY KEY,
      key_id text NOT NULL,
      model text NOT NULL,
      body text NOT NULL,
      transcript jsonb NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
  }),
  "0004_metering": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // One row per metered call; request_id makes a retried batch insert idempotent.
    yield* sql`CREATE TABLE usage_ledger (
      request_id text PRIMARY KEY,
      key_id text NOT NULL,
      model text NOT NULL,
      funding text NOT NULL,
      input_tokens bigint NOT NULL,
      output_tokens bigint NOT NULL,
      cached_input_tokens bigint NOT NULL,
      reasoning_tokens bigint NOT NULL,
      cost_micros bigint NOT NULL,
      at timestamptz NOT NULL
    )`
    yield* sql`CREATE INDEX usage_ledger_key_at_idx ON usage_ledger (key_id, at)`
    yield* sql`CREATE TABLE credit_grants (
      id text PRIMARY KEY,
      key_id text NOT NULL,
      amount_micros bigint NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
    yield* sql`CREATE INDEX credit_grants_key_idx ON credit_grants (key_id)`
  }),
  "0005_runs": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // `machine` is the run machine's persisted state (machines/run.ts), folded in the same
    // transaction as every append, so `status` never disagrees with the log. The budget check keeps
    // spend + holds under the ceiling even if a bug tried otherwise.
    yield* sql`CREATE TABLE runs (
      id text PRIMARY KEY,
      key_id text NOT NULL,
      parent_run_id text,
      status text NOT NULL,
      executable boolean NOT NULL,
      model text,
      input jsonb,
      tools jsonb NOT NULL,
      optimization jsonb NOT NULL,
      metadata jsonb NOT NULL,
      node_ids jsonb NOT NULL,
      machine jsonb NOT NULL,
      last_seq bigint NOT NULL DEFAULT 0,
      budget_micros bigint,
      spent_micros bigint NOT NULL DEFAULT 0,
      reserved_micros bigint NOT NULL DEFAULT 0,
      input_tokens bigint NOT NULL DEFAULT 0,
      output_tokens bigint NOT NULL DEFAULT 0,
      lease_owner text,
      lease_expires_at timestamptz,
      attempt integer NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      finished_at timestamptz,
      CHECK (budget_micros IS NULL OR spent_micros + reserved_micros <= budget_micros)
    )`
    yield* sql`CREATE INDEX runs_key_created_idx ON runs (key_id, created_at DESC, id DESC)`
    yield* sql`CREATE INDEX runs_parent_idx ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL`
    yield* sql`CREATE INDEX runs_lease_idx ON runs (lease_expires_at) WHERE executable AND finished_at IS NULL`
    yield* sql`CREATE INDEX runs_finished_idx ON runs (finished_at) WHERE finished_at IS NOT NULL`
    yield* sql`CREATE TABLE run_events (
      run_id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
      seq bigint NOT NULL,
      type text NOT NULL,
      data jsonb NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (run_id, seq)
    )`
    // One row per step: its budget hold, then its settled cost (once, whatever the retries).
    yield* sql`CREATE TABLE run_charges (
      node_id text PRIMARY KEY,
      run_id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
      reserved_micros bigint NOT NULL,
      cost_micros bigint,
      settled_at timestamptz
    )`
    yield* sql`CREATE TABLE run_idempotency (
      key_id text NOT NULL,
      idempotency_key text NOT NULL,
      request_hash text NOT NULL,
      run_id text NOT NULL,
      status integer NOT NULL,
      response jsonb NOT NULL,
      expires_at timestamptz NOT NULL,
      PRIMARY KEY (key_id, idempotency_key)
    )`
    yield* sql`CREATE INDEX run_idempotency_expires_idx ON run_idempotency (expires_at)`
  }),
  "0006_stored_response_items": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Stored JSON is kept as text from here on: JSON.stringify escapes NUL and unpaired
    // surrogates, which jsonb refuses, so whatever a model answers can be stored.
    yield* sql`ALTER TABLE stored_responses ALTER COLUMN transcript TYPE text USING transcript::text`
    // The answer's canonical events and echo, so a retrieve with stream=true replays its events.
    yield* sql`ALTER TABLE stored_responses ADD COLUMN replay text`
    // The input items listed by GET /v1/responses/{id}/input_items (earlier turns included).
    yield* sql`ALTER TABLE stored_responses ADD COLUMN input_items text`
    yield* sql`CREATE INDEX stored_responses_created_idx ON stored_responses (created_at)`
    // Every item a later request may name in an item_reference: output items and the input
    // items whose ids the gateway minted. Ids are unique across keys; lookups filter by key.
    yield* sql`CREATE TABLE stored_response_items (
      id text PRIMARY KEY,
      key_id text NOT NULL,
      response_id text NOT NULL REFERENCES stored_responses (id) ON DELETE CASCADE,
      item text NOT NULL
    )`
    yield* sql`CREATE INDEX stored_response_items_response_idx ON stored_response_items (response_id)`
  }),
  "0007_artifacts": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // One row per distinct content of a key (`status`: pending → ready → deleted); versions point
    // at contents, so identical content is parsed and stored once per key.
    yield* sql`CREATE TABLE artifact_contents (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      key_id text NOT NULL,
      hash text NOT NULL,
      size_bytes bigint NOT NULL,
      status text NOT NULL,
      format text NOT NULL,
      shape jsonb NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
    yield* sql`CREATE UNIQUE INDEX artifact_contents_ready_idx ON artifact_contents (key_id, hash) WHERE status = 'ready'`
    yield* sql`CREATE INDEX artifact_contents_sweep_idx ON artifact_contents (status, created_at) WHERE status <> 'ready'`
    // Raw content. EXTERNAL storage: no compression, so a byte range reads only the pages it covers.
    yield* sql`CREATE TABLE artifact_chunks (
      content_id bigint NOT NULL,
      chunk_no integer NOT NULL,
      bytes bytea NOT NULL,
      PRIMARY KEY (content_id, chunk_no)
    )`
    yield* sql`ALTER TABLE artifact_chunks ALTER COLUMN bytes SET STORAGE EXTERNAL`
    // One row per record; the primary key makes one content's rows one contiguous index range.
    yield* sql`CREATE TABLE artifact_rows (
      content_id bigint NOT NULL,
      row_no integer NOT NULL,
      data jsonb NOT NULL,
      original jsonb,
      PRIMARY KEY (content_id, row_no)
    )`
    // Search text apart from the rows, so filters and sorts scan narrow tuples.
    yield* sql`CREATE TABLE artifact_row_search (
      content_id bigint NOT NULL,
      row_no integer NOT NULL,
      search text NOT NULL,
      PRIMARY KEY (content_id, row_no)
    )`
    yield* sql`CREATE TABLE artifacts (
      id text PRIMARY KEY,
      key_id text NOT NULL,
      head_version integer NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
    yield* sql`CREATE INDEX artifacts_key_idx ON artifacts (key_id)`
    yield* sql`CREATE TABLE artifact_versions (
      artifact_id text NOT NULL REFERENCES artifacts (id) ON DELETE CASCADE,
      version integer NOT NULL,
      content_id bigint NOT NULL REFERENCES artifact_contents (id),
      mime_type text NOT NULL,
      summary text,
      source text NOT NULL,
      provenance jsonb NOT NULL,
      declared_row_count bigint,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (artifact_id, version)
    )`
    yield* sql`CREATE INDEX artifact_versions_content_idx ON artifact_versions (content_id)`
  }),
  "0008_dashboard_sessions": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Dashboard sign-ins. The cookie holds a random id; only its SHA-256 is stored, so a copy of
    // this table signs nobody in. `admin_fingerprint` ends operator sessions when the admin token
    // changes; `key_id` names the key of a key-holder session (its revocation ends the session).
    yield* sql`CREATE TABLE dashboard_sessions (
      id_hash text PRIMARY KEY,
      role text NOT NULL,
      key_id text,
      admin_fingerprint text,
      csrf_token text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL
    )`
    yield* sql`CREATE INDEX dashboard_sessions_expires_idx ON dashboard_sessions (expires_at)`
  }),
  "0009_batches_and_files": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Uploaded files (OpenAI /v1/files) and the files batches write. Content is kept in chunks of
    // at most 1 MiB, so no row comes near what the SQL client reads at once.
    yield* sql`CREATE TABLE files (
      id text PRIMARY KEY,
      key_id text NOT NULL,
      filename text NOT NULL,
      purpose text NOT NULL,
      bytes bigint NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz
    )`
    yield* sql`CREATE INDEX files_key_created_idx ON files (key_id, created_at DESC, id DESC)`
    yield* sql`CREATE TABLE file_chunks (
      file_id text NOT NULL REFERENCES files (id) ON DELETE CASCADE,
      seq integer NOT NULL,
      data bytea NOT NULL,
      PRIMARY KEY (file_id, seq)
    )`
    // One row per batch; machine is the batch machine's state (machines/batch.ts), folded in the
    // transaction of every change to its requests, status its wire status for listing.
    yield* sql`CREATE TABLE batches (
      id text PRIMARY KEY,
      key_id text NOT NULL,
      kind text NOT NULL,
      endpoint text NOT NULL,
      machine jsonb NOT NULL,
      status text NOT NULL,
      input_file_id text,
      output_file_id text,
      error_file_id text,
      errors jsonb,
      metadata jsonb,
      completion_window text,
      created_at timestamptz NOT NULL DEFAULT now(),
      in_progress_at timestamptz,
      finalizing_at timestamptz,
      ended_at timestamptz,
      cancel_initiated_at timestamptz,
      expires_at timestamptz NOT NULL,
      archived_at timestamptz
    )`
    yield* sql`CREATE INDEX batches_key_created_idx ON batches (key_id, kind, created_at DESC, id DESC)`
    yield* sql`CREATE INDEX batches_live_idx ON batches (expires_at) WHERE ended_at IS NULL`
    // One row per request, written in the create's transaction. state: pending → running (a
    // worker holds its lease; attempt is the fence) → succeeded | errored | canceled | expired.
    // A result is written only by the holder of the current attempt, so a custom_id gets one.
    yield* sql`CREATE TABLE batch_requests (
      batch_id text NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
      idx integer NOT NULL,
      custom_id text NOT NULL,
      params text NOT NULL,
      state text NOT NULL,
      result text,
      lease_owner text,
      lease_expires_at timestamptz,
      not_before timestamptz,
      attempt integer NOT NULL DEFAULT 0,
      takeovers integer NOT NULL DEFAULT 0,
      ended_at timestamptz,
      PRIMARY KEY (batch_id, idx),
      UNIQUE (batch_id, custom_id)
    )`
    yield* sql`CREATE INDEX batch_requests_open_idx ON batch_requests (state, lease_expires_at) WHERE state IN ('pending', 'running')`
  }),
  "0010_artifact_row_keys": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Row keys (src/artifacts/row-keys.ts): each row's number columns as doubles, next to its search
    // text, so filters and sorts on them scan narrow rows. `row_keys` says a content has them:
    // contents stored before this migration do not, and their queries read the jsonb rows as before.
    // Both are metadata-only changes (a nullable column, a constant default): no table is rewritten.
    yield* sql`ALTER TABLE artifact_row_search ADD COLUMN nums float8[]`
    yield* sql`ALTER TABLE artifact_contents ADD COLUMN row_keys boolean NOT NULL DEFAULT false`
  }),
  "0011_document_sizes": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // The size of what a read returns, as JSON text, kept beside it so a page stops at a byte budget:
    // a run's log (`RunLog.read`: an event may be 16 MiB, and 500 of them were one statement's
    // result) and a list of runs (their tools and metadata, 16 MiB each, 100 runs a page).
    yield* sql`ALTER TABLE run_events ADD COLUMN bytes integer NOT NULL DEFAULT 0`
    yield* sql`UPDATE run_events SET bytes = octet_length(data::text)`
    yield* sql`ALTER TABLE runs ADD COLUMN documents_bytes bigint NOT NULL DEFAULT 0`
    yield* sql`UPDATE runs SET documents_bytes = octet_length(tools::text) + octet_length(metadata::text)`
  }),
  "0012_state_chunks": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // A state's value as its JSON text in chunks of at most 1 MiB (`states-repo.ts`), read and
    // written a chunk per statement, instead of one jsonb of up to 16 MiB decoded at once.
    yield* sql`CREATE TABLE state_chunks (
      state_id text NOT NULL REFERENCES states (id) ON DELETE CASCADE,
      chunk_no integer NOT NULL,
      data bytea NOT NULL,
      PRIMARY KEY (state_id, chunk_no)
    )`
    yield* sql`ALTER TABLE states ADD COLUMN bytes bigint NOT NULL DEFAULT 0`
    yield* sql`UPDATE states SET bytes = octet_length(convert_to(value::text, 'UTF8'))`
    yield* sql`INSERT INTO state_chunks (state_id, chunk_no, data)
      SELECT s.id, n, substring(convert_to(s.value::text, 'UTF8') FROM n * 1048576 + 1 FOR 1048576)
      FROM states s, generate_series(0, ((s.bytes - 1) / 1048576)::integer) AS n`
    yield* sql`ALTER TABLE states DROP COLUMN value`
  }),
  "0013_run_event_text": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // An event kept as the JSON text it was written in (json, not jsonb): its SSE frame is that
    // text as stored, sent without being decoded or parsed (`RunLog.texts`).
    yield* sql`ALTER TABLE run_events ALTER COLUMN data TYPE json USING data::json`
  }),
  "0014_staged_documents": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // A large document on its way into a row, 1 MiB per row (`storage/json-parameter.ts`): written
    // and removed within the transaction that stores it, so never seen outside it.
    yield* sql`CREATE TABLE staged_documents (
      id text NOT NULL,
      n integer NOT NULL,
      data bytea NOT NULL,
      PRIMARY KEY (id, n)
    )`
  })
}
