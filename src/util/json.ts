/** A parsed JSON value, read-only: what request bodies, states, runs and artifact rows hold. */
export type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [key: string]: Json }
