/**
 * Dashboard sign-ins. Signing in with the admin token opens an *operator* session; signing in with
 * an `svc_` key opens a *key-holder* session that only ever sees that key's data.
 *
 * The browser holds a random session id in an HttpOnly cookie (never the token, never in a URL);
 * the table stores only the id's SHA-256, the role, and a per-session CSRF token. A session ends
 * at its expiry (`GATEWAY_DASHBOARD_SESSION_MS`, 12 h by default, counted from sign-in), at
 * sign-out, when the admin token changes (operator sessions) or when its key is revoked
 * (key-holder sessions). Sessions live in SQL, so every instance behind a load balancer honours them.
 */
import { Clock, Context, Effect, Layer } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { Settings } from "../config/settings.ts"
import type { ServiceUnavailable } from "../errors.ts"
import { AdminToken } from "../keys/admin-token.ts"
import { ApiKeys } from "../keys/api-keys.ts"
import type { KeyRecord } from "../keys/keys-repo.ts"
import { secretsEqual, sha256Hex } from "../keys/secrets.ts"
import { randomBase62 } from "../util/ids.ts"

type SessionRole = "operator" | "key"

interface SessionCommon {
  readonly csrfToken: string
  readonly expiresAt: Date
}

/** An operator's session, or a key holder's with the signed-in key (as of this request). */
export type DashboardSession =
  | SessionCommon & { readonly role: "operator"; readonly key: undefined }
  | SessionCommon & { readonly role: "key"; readonly key: KeyRecord }

/** A key holder's session. */
export type KeyHolderSession = Extract<DashboardSession, { readonly role: "key" }>

/** Why a cookie did not lead to a session: the dashboard says so instead of a bare 401. */
export type SessionLookup =
  | { readonly _tag: "Active"; readonly session: DashboardSession }
  | { readonly _tag: "Ended"; readonly reason: string }

export interface SignedIn {
  /** The cookie value: shown to the browser once, stored only as a hash. */
  readonly sessionId: string
  readonly session: DashboardSession
}

interface SessionRow {
  readonly role: SessionRole
  readonly key_id: string | null
  readonly admin_fingerprint: string | null
  readonly csrf_token: string
  readonly expires_at: Date
}

export class DashboardSessions extends Context.Service<DashboardSessions, {
  /** A session for the admin token or an active `svc_` key; undefined for anything else. */
  signIn(token: string): Effect.Effect<SignedIn | undefined, SqlError.SqlError | ServiceUnavailable>
  lookup(sessionId: string): Effect.Effect<SessionLookup, SqlError.SqlError>
  signOut(sessionId: string): Effect.Effect<void, SqlError.SqlError>
  /** Constant-time check of a presented CSRF token against the session's. */
  csrfMatches(session: DashboardSession, presented: string | undefined): boolean
  readonly ttlMs: number
}>()("gateway/dashboard/DashboardSessions") {
  static readonly layer = Layer.effect(DashboardSessions, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const admin = yield* AdminToken
    const keys = yield* ApiKeys
    const ttlMs = (yield* Settings).dashboardSessionMs
    let lastPurge = 0

    /** Expired rows are deleted now and then at sign-in: a lookup never needs them. */
    const purgeExpired = Effect.fnUntraced(function*(now: number) {
      if (now - lastPurge < 60_000) return
      lastPurge = now
      yield* sql`DELETE FROM dashboard_sessions WHERE expires_at < now()`
    })

    const signIn = Effect.fn("DashboardSessions.signIn")(function*(token: string) {
      let who: { readonly role: "operator"; readonly key: undefined } | { readonly role: "key"; readonly key: KeyRecord }
      if (admin.verify(token)) {
        who = { role: "operator", key: undefined }
      } else {
        const key = token.startsWith("svc_") ? yield* keys.authenticate(token) : undefined
        if (key === undefined) return undefined
        who = { role: "key", key }
      }
      const { role, key } = who
      const now = yield* Clock.currentTimeMillis
      yield* purgeExpired(now)
      const sessionId = randomBase62(32)
      const csrfToken = randomBase62(32)
      const expiresAt = new Date(now + ttlMs)
      yield* sql`INSERT INTO dashboard_sessions (id_hash, role, key_id, admin_fingerprint, csrf_token, expires_at)
        VALUES (${sha256Hex(sessionId)}, ${role}, ${key?.id ?? null}, ${role === "operator" ? admin.fingerprint : null},
          ${csrfToken}, ${expiresAt.toISOString()})`
      return { sessionId, session: { ...who, csrfToken, expiresAt } } satisfies SignedIn
    })

    const end = (idHash: string, reason: string) =>
      Effect.as(sql`DELETE FROM dashboard_sessions WHERE id_hash = ${idHash}`, { _tag: "Ended", reason } as const)

    const lookup = Effect.fn("DashboardSessions.lookup")(function*(sessionId: string) {
      const idHash = sha256Hex(sessionId)
      const rows = yield* sql<SessionRow>`SELECT role, key_id, admin_fingerprint, csrf_token, expires_at
        FROM dashboard_sessions WHERE id_hash = ${idHash}`
      const row = rows[0]
      if (row === undefined) return { _tag: "Ended", reason: "You are signed out; sign in to continue" } as const
      const expiresAt = new Date(row.expires_at)
      if (expiresAt.getTime() <= (yield* Clock.currentTimeMillis)) return yield* end(idHash, "Your session expired; sign in again")
      if (row.role === "operator") {
        if (row.admin_fingerprint !== admin.fingerprint) return yield* end(idHash, "The admin token changed; sign in with the new one")
        return { _tag: "Active", session: { role: "operator", key: undefined, csrfToken: row.csrf_token, expiresAt } } as const
      }
      const key = row.key_id === null ? undefined : yield* keys.get(row.key_id).pipe(Effect.catchTag("NotFound", () => Effect.succeed(undefined)))
      if (key === undefined || key.revokedAt !== null) return yield* end(idHash, "This API key was revoked; sign in with another one")
      return { _tag: "Active", session: { role: "key", key, csrfToken: row.csrf_token, expiresAt } } as const
    })

    const signOut = Effect.fn("DashboardSessions.signOut")(function*(sessionId: string) {
      yield* sql`DELETE FROM dashboard_sessions WHERE id_hash = ${sha256Hex(sessionId)}`
    })

    const csrfMatches = (session: DashboardSession, presented: string | undefined) =>
      presented !== undefined && presented !== "" && secretsEqual(presented, session.csrfToken)

    return DashboardSessions.of({ signIn, lookup, signOut, csrfMatches, ttlMs })
  }))
}
