/** A JSON object as read from the wire, before (or instead of) decoding it. */
export type Obj = { readonly [key: string]: unknown }

export const isObject = (value: unknown): value is Obj =>
  typeof value === "object" && value !== null && !Array.isArray(value)
