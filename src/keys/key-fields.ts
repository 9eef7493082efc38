/**
 * What a key may be given — its name, its plan, its permissions — by the admin API (`POST` and
 * `PATCH /admin/v1/keys`) and by `gateway keys create` alike: one rule for both. (The command line
 * took any name and any model pattern; the API refused a name over 200 characters and a pattern
 * with other characters than letters, digits, `. - _ :` and `*`.)
 */
import { Schema } from "effect"
import { PermissionsInput } from "./permissions.ts"

const KeyName = Schema.String.check(Schema.isMaxLength(200))
const PlanName = Schema.String.check(Schema.isMinLength(1))

export const KeyFields = Schema.Struct({
  name: Schema.optional(Schema.NullOr(KeyName)),
  plan: Schema.optional(PlanName),
  permissions: Schema.optional(Schema.NullOr(PermissionsInput))
})
export type KeyFields = typeof KeyFields.Type
