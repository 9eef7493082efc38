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
  })
}
