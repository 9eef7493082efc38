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
  "0006_dashboard_sessions": Effect.gen(function*() {
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
  })
}
