/**
 * The admin token guards `/admin/v1`. `GATEWAY_ADMIN_TOKEN` wins; otherwise the token lives in
 * `<dataDir>/admin-token` (mode 0600), created on first start and printed once.
 */
import { Context, Effect, Layer, Redacted } from "effect"
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Settings } from "../config/settings.ts"
import { ensureDataDir } from "../storage/data-dir.ts"
import { newAdminToken, secretsEqual, sha256Hex } from "./secrets.ts"

export class AdminToken extends Context.Service<AdminToken, {
  /** True when the presented bearer token is the admin token (constant-time). */
  verify(presented: string): boolean
  /** Set only when this start created the token, so it can be printed once. */
  readonly created: Redacted.Redacted<string> | undefined
  readonly source: "environment" | "file"
  /**
   * A one-way digest of the token. Dashboard sessions signed in with the token record it, so a
   * changed token ends them (the token itself is never stored).
   */
  readonly fingerprint: string
}>()("gateway/keys/AdminToken") {
  static readonly layer = Layer.effect(AdminToken, Effect.gen(function*() {
    const settings = yield* Settings
    let token: string
    let created: Redacted.Redacted<string> | undefined
    let source: "environment" | "file" = "file"
    if (settings.adminToken !== undefined) {
      token = Redacted.value(settings.adminToken)
      source = "environment"
    } else {
      yield* ensureDataDir(settings.dataDir)
      const file = join(settings.dataDir, "admin-token")
      if (existsSync(file)) {
        token = readFileSync(file, "utf8").trim()
      } else {
        token = newAdminToken()
        writeFileSync(file, token + "\n", { mode: 0o600 })
        created = Redacted.make(token)
      }
    }
    return AdminToken.of({
      verify: (presented) => secretsEqual(presented, token),
      created,
      source,
      fingerprint: sha256Hex(`admin-token:${token}`)
    })
  }))
}
