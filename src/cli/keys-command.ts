/**
 * `gateway keys create|list|revoke`: manages keys straight in the database, for when no server is
 * running (the embedded database can only be opened by one process; with a server up, use the
 * admin API instead).
 */
import { Console, Effect, Layer } from "effect"
import { ConfigFile } from "../config/config-file.ts"
import { keyView } from "../http/admin-routes.ts"
import { ApiKeys } from "../keys/api-keys.ts"
import { KEYS_HELP } from "./help.ts"
import { Surfaces, type Surface } from "../keys/permissions.ts"
import { DatabaseLive } from "../storage/database.ts"

const KeysLive = ApiKeys.layer.pipe(Layer.provideMerge(DatabaseLive), Layer.provideMerge(ConfigFile.layer))

const splitList = (s: string | undefined) => s === undefined ? null : s.split(",").map((x) => x.trim()).filter((x) => x !== "")

export const keysCommand = (
  positionals: ReadonlyArray<string>,
  options: { name?: string | undefined; plan?: string | undefined; surfaces?: string | undefined; models?: string | undefined; json?: boolean | undefined }
) =>
  Effect.gen(function*() {
    const keys = yield* ApiKeys
    const [action, id] = positionals
    switch (action) {
      case "create": {
        const surfaces = splitList(options.surfaces)
        const unknown = surfaces?.find((s) => !(Surfaces as ReadonlyArray<string>).includes(s))
        if (unknown !== undefined) return yield* Effect.fail(new Error(`--surfaces: unknown surface "${unknown}"`))
        const { record, secret } = yield* keys.create({
          name: options.name ?? null,
          ...(options.plan === undefined ? {} : { plan: options.plan }),
          permissions: { surfaces: surfaces as Array<Surface> | null, models: splitList(options.models) }
        })
        yield* Console.log(`created ${record.id} (plan ${record.plan})\nkey (shown once): ${secret}`)
        return
      }
      case "list": {
        const all = (yield* keys.list()).map(keyView)
        if (options.json) return yield* Console.log(JSON.stringify(all, null, 2))
        if (all.length === 0) return yield* Console.log("no keys")
        for (const k of all) {
          yield* Console.log(`${k.id}  ${k.hint}  plan=${k.plan}  ${k.revoked ? "revoked" : "active"}  ${k.name ?? ""}`)
        }
        return
      }
      case "revoke": {
        if (id === undefined) return yield* Effect.fail(new Error("keys revoke: give the key id"))
        const record = yield* keys.revoke(id)
        yield* Console.log(`revoked ${record.id}`)
        return
      }
      default:
        return yield* Effect.fail(new Error(`keys: unknown action "${action}"\n\n${KEYS_HELP}`))
    }
  }).pipe(Effect.provide(KeysLive))
