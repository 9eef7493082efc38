/**
 * `gateway keys create|list|revoke`: manages keys straight in the database, for when no server is
 * running (the embedded database can only be opened by one process; with a server up, use the
 * admin API instead).
 *
 * The arguments are checked before the database is opened: a mistake (an unknown action, plan or
 * surface, a missing id) is reported as itself at once, even while a server holds the embedded
 * database, and costs no database start.
 */
import { Console, Effect, Layer, Schema } from "effect"
import { ConfigFile } from "../config/config-file.ts"
import { keyView } from "../http/admin-routes.ts"
import { ApiKeys, unknownPlan } from "../keys/api-keys.ts"
import { KEYS_HELP } from "./help.ts"
import { KeyFields } from "../keys/key-fields.ts"
import { normalizePermissions, type Permissions } from "../keys/permissions.ts"
import { Surfaces } from "../keys/surfaces.ts"
import { firstIssue } from "../util/schema-issue.ts"
import { DatabaseLive } from "../storage/database.ts"

const KeysLive = ApiKeys.layer.pipe(Layer.provideMerge(DatabaseLive))

/** The option that gives each of the key's fields. */
const OPTION_OF_FIELD: Readonly<Record<string, string>> = { "name": "name", "plan": "plan", "permissions.surfaces": "surfaces", "permissions.models": "models" }

const splitList = (s: string | undefined) => s === undefined ? null : s.split(",").map((x) => x.trim()).filter((x) => x !== "")

export interface KeysOptions {
  readonly name?: string | undefined
  readonly plan?: string | undefined
  readonly surfaces?: string | undefined
  readonly models?: string | undefined
  readonly json?: boolean | undefined
}

/** What the command line asks for, once its arguments are known to be valid. */
type KeysAction =
  | { readonly _tag: "create"; readonly name: string | null; readonly plan: string | undefined; readonly permissions: Permissions }
  | { readonly _tag: "list"; readonly json: boolean }
  | { readonly _tag: "revoke"; readonly id: string }

/** The action the arguments ask for, or the mistake in them (checked against the config's plans). */
const actionOf = Effect.fn("keysCommand.actionOf")(function*(positionals: ReadonlyArray<string>, options: KeysOptions) {
  const config = yield* ConfigFile
  const [action, id] = positionals
  switch (action) {
    case "create": {
      const surfaces = splitList(options.surfaces)
      const unknown = surfaces?.find((s) => !(Surfaces as ReadonlyArray<string>).includes(s))
      if (unknown !== undefined) return yield* Effect.fail(new Error(`--surfaces: unknown surface "${unknown}"`))
      const planMistake = options.plan === undefined ? undefined : unknownPlan(config, options.plan)
      if (planMistake !== undefined) return yield* Effect.fail(new Error(`--${planMistake}`))
      // The rest by the admin API's own rules (`KeyFields`), each mistake named by its option.
      const fields = yield* Schema.decodeUnknownEffect(KeyFields)({
        name: options.name ?? null,
        ...(options.plan === undefined ? {} : { plan: options.plan }),
        permissions: { surfaces, models: splitList(options.models) }
      }).pipe(Effect.mapError((error) => {
        const { path, message } = firstIssue(error)
        const field = path.replace(/\[\d+\]$/, "") // a list's item: the list's option
        return new Error(`--${OPTION_OF_FIELD[field] ?? field}: ${message}`)
      }))
      return { _tag: "create", name: fields.name ?? null, plan: fields.plan, permissions: normalizePermissions(fields.permissions) } satisfies KeysAction
    }
    case "list":
      return { _tag: "list", json: options.json === true } satisfies KeysAction
    case "revoke":
      if (id === undefined) return yield* Effect.fail(new Error("keys revoke: give the key id"))
      return { _tag: "revoke", id } satisfies KeysAction
    default:
      return yield* Effect.fail(new Error(`keys: unknown action "${action}"\n\n${KEYS_HELP}`))
  }
})

const perform = (action: KeysAction) =>
  Effect.gen(function*() {
    const keys = yield* ApiKeys
    switch (action._tag) {
      case "create": {
        const { record, secret } = yield* keys.create({
          name: action.name,
          ...(action.plan === undefined ? {} : { plan: action.plan }),
          permissions: action.permissions
        })
        yield* Console.log(`created ${record.id} (plan ${record.plan})\nkey (shown once): ${secret}`)
        return
      }
      case "list": {
        const all = (yield* keys.list()).map(keyView)
        if (action.json) return yield* Console.log(JSON.stringify(all, null, 2))
        if (all.length === 0) return yield* Console.log("no keys")
        for (const k of all) {
          yield* Console.log(`${k.id}  ${k.hint}  plan=${k.plan}  ${k.revoked ? "revoked" : "active"}  ${k.name ?? ""}`)
        }
        return
      }
      case "revoke": {
        const record = yield* keys.revoke(action.id)
        yield* Console.log(`revoked ${record.id}`)
        return
      }
    }
  }).pipe(Effect.provide(KeysLive))

export const keysCommand = (positionals: ReadonlyArray<string>, options: KeysOptions) =>
  actionOf(positionals, options).pipe(Effect.flatMap(perform), Effect.provide(ConfigFile.layer))
