/** The type of undici's Pool class at its own path (see upstream.ts): the package's `Pool`. */
declare module "undici/lib/dispatcher/pool.js" {
  import type { Pool } from "undici"
  const PoolClass: typeof Pool
  export default PoolClass
}
