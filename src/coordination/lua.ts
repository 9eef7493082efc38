/**
 * Lua scripts of the Redis store. Each runs atomically on the server, which is what makes
 * "check and take" safe across instances. The arithmetic mirrors `in-process.ts`.
 *
 * Budget keys (one hash slot per budget, via the `{…}` tag): B = hash {spent, reserved, granted},
 * H = hash id → amount | "d" (done: a finished hold) | "d<micros>" (done: an applied charge, and
 * what it charged), E = zset id → expiry,
 * P = hash charge id → micros (pending charges that landed while unseeded), G = set of applied
 * credit grant ids. Amounts are integer micros (HINCRBY); `spent` absent on B means unseeded. An
 * unseeded budget's keys live `memoryMs` after their last write; a seed gives them the budget's.
 * A decrement is written `0 - x`, never `-x`: for a hold of 0 micros (a free call) `-x` is Lua's
 * -0, which reaches Redis as "-0", and HINCRBY refuses that as not an integer.
 */

/** Reclaims lapsed holds (an active one returns its amount to the pool) and forgets old "done" ids. */
const SWEEP = `
-- A done id's value: 'd' (a finished hold), or 'd' and the micros an applied charge charged.
local function isDone(v)
  return v ~= false and v ~= nil and string.byte(v, 1) == 100
end
-- Lapsed ids are read and deleted together (a settled call's two ids lapse at once): one HMGET and
-- one HDEL per 1,000 ids (unpack's bound on a call's arguments: a long idle leaves many at once),
-- and what active holds return goes back to the pool in one HINCRBY. (\`now\`: ARGV's own string
-- where the caller has it, not a number Lua formats again for the command.)
local function sweep(b, h, e, now)
  local lapsed = redis.call('ZRANGEBYSCORE', e, '-inf', now)
  local n = #lapsed
  if n == 0 then return 0 end
  local returned = 0
  for from = 1, n, 1000 do
    local to = math.min(from + 999, n)
    local values = redis.call('HMGET', h, unpack(lapsed, from, to))
    for i = 1, to - from + 1 do
      if values[i] and not isDone(values[i]) then returned = returned + tonumber(values[i]) end
    end
    redis.call('HDEL', h, unpack(lapsed, from, to))
  end
  if returned ~= 0 then redis.call('HINCRBY', b, 'reserved', 0 - returned) end
  redis.call('ZREMRANGEBYSCORE', e, '-inf', now)
  return n
end
local function state(b)
  local s = redis.call('HMGET', b, 'spent', 'reserved', 'granted')
  return tonumber(s[1]), tonumber(s[2] or 0), tonumber(s[3] or 0)
end
local function expire(keys, at)
  if tonumber(at) > 0 then for _, k in ipairs(keys) do redis.call('PEXPIREAT', k, at) end end
end
local function seeded(b)
  return redis.call('HEXISTS', b, 'spent') == 1
end
local function done(h, e, id, forgetAt, charge)
  if charge == nil then redis.call('HSET', h, id, 'd') else redis.call('HSET', h, id, 'd' .. charge) end
  redis.call('ZADD', e, forgetAt, id)
end
-- After a write: H and E follow B's expiry when seeded; an unseeded budget's keys live memoryMs.
-- (The caller says whether B is seeded: only SEED changes that, so a script reads it once.)
local function keep(keys, memory, isSeeded)
  if isSeeded then
    local ttl = redis.call('PTTL', keys[1])
    if ttl > 0 then
      redis.call('PEXPIRE', keys[2], ttl)
      redis.call('PEXPIRE', keys[3], ttl)
    end
  else
    for _, k in ipairs(keys) do redis.call('PEXPIRE', k, memory) end
  end
end
`

/**
 * Buckets store what was used ('u', draining at capacity/period) so a larger limit applies at once.
 * KEYS: lease zset, then one hash per bucket. ARGV: now, leaseLimit (-1: none), leaseId, leaseTtl,
 * n, then capacity, periodMs, cost per bucket.
 * Returns {admitted, leaseRefused, leasesInUse, then remaining, resetMs, retryAfterMs per bucket}.
 */
export const GATE = `
local now = tonumber(ARGV[1])
local leaseLimit = tonumber(ARGV[2])
local leaseTtl = tonumber(ARGV[4])
local n = tonumber(ARGV[5])
local admitted = 1
local buckets = {}
for i = 1, n do
  local cap = tonumber(ARGV[3 * i + 3])
  local period = tonumber(ARGV[3 * i + 4])
  local cost = math.min(tonumber(ARGV[3 * i + 5]), cap)
  local st = redis.call('HMGET', KEYS[i + 1], 'u', 'ts')
  local used = 0
  if st[1] then
    used = math.max(0, tonumber(st[1]) - math.max(0, now - tonumber(st[2])) * cap / period)
  end
  buckets[i] = { cap, period, cost, used }
  if used + cost > cap + 1e-9 then admitted = 0 end
end
local inUse = 0
local leaseRefused = 0
if leaseLimit >= 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
  inUse = redis.call('ZCARD', KEYS[1])
  if inUse >= leaseLimit and not redis.call('ZSCORE', KEYS[1], ARGV[3]) then
    leaseRefused = 1
    admitted = 0
  end
  if admitted == 1 then
    inUse = inUse + redis.call('ZADD', KEYS[1], now + leaseTtl, ARGV[3])
    redis.call('PEXPIRE', KEYS[1], leaseTtl)
  end
end
local out = { admitted, leaseRefused, inUse }
for i = 1, n do
  local cap, period, cost, used = unpack(buckets[i])
  local after = used
  local retry = 0
  if admitted == 1 then
    after = used + cost
    -- Every digit of the double (%.17g reads back exactly): six decimals drifted from the in-process
    -- store's figures by up to 0.02 ms of reset time (found by coordination-drift.test.ts).
    redis.call('HSET', KEYS[i + 1], 'u', string.format('%.17g', after), 'ts', ARGV[1])
    redis.call('PEXPIRE', KEYS[i + 1], math.ceil(after * period / cap) + 1000)
  elseif used + cost > cap + 1e-9 then
    retry = math.ceil((used + cost - cap) * period / cap - 1e-6)
  end
  table.insert(out, math.max(0, math.floor(cap - after + 1e-9)))
  table.insert(out, math.ceil(after * period / cap - 1e-6))
  table.insert(out, retry)
end
return out
`

/** KEYS: lease zset. ARGV: id. Gives a lease back (a script so it joins its turn's bundle: script-bundle.ts). */
export const RELEASE_LEASE = `
return redis.call('ZREM', KEYS[1], ARGV[1])
`

/** KEYS: lease zset. ARGV: id, expiresAt, ttl. Extends a lease only if it is still held. */
export const RENEW_LEASE = `
if redis.call('ZADD', KEYS[1], 'XX', 'CH', ARGV[2], ARGV[1]) == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return 1
`

/** KEYS: B, H, E. ARGV: cap (-1: granted), amount, id, ttl, now, expireAt. {0} | {1|2, spent, reserved, granted} */
export const RESERVE = SWEEP + `
local spent, reserved, granted = state(KEYS[1])
if not spent then return { 0 } end
local now = tonumber(ARGV[5])
-- (The state read above stands unless the sweep returned lapsed holds to the pool.)
if sweep(KEYS[1], KEYS[2], KEYS[3], ARGV[5]) > 0 then spent, reserved, granted = state(KEYS[1]) end
if redis.call('HEXISTS', KEYS[2], ARGV[3]) == 1 then return { 1, spent, reserved, granted } end
local cap = tonumber(ARGV[1])
if cap < 0 then cap = granted end
local amount = tonumber(ARGV[2])
if spent + reserved + math.max(amount, 1) > cap then return { 2, spent, reserved, granted } end
redis.call('HINCRBY', KEYS[1], 'reserved', ARGV[2])
redis.call('HSET', KEYS[2], ARGV[3], ARGV[2])
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[4]), ARGV[3])
expire(KEYS, ARGV[6])
return { 1, spent, reserved + amount, granted }
`

/**
 * A call's admission in one EVALSHA: GATE and then RESERVE, each exactly as it runs alone (the
 * caller undoes the one that took when the other refuses). One script instead of a pipeline of
 * two: Redis pays each script's fixed cost once, the client builds one command and reads one reply.
 * KEYS: GATE's, then RESERVE's, then (when ARGV[3] > 0) the admission ticket. ARGV: GATE's key
 * count, GATE's argument count, the ticket's TTL in ms (0: no ticket), GATE's arguments, then
 * RESERVE's. Returns {GATE's reply, RESERVE's reply}.
 *
 * The ticket is left only when both took: the call is admitted. The capacity queue's ENQUEUE, sent
 * right behind this script on the same connection, takes it (queue-lua.ts), so the slot is asked
 * for in the same round trip and is never taken for a call that was refused.
 */
export const GATE_AND_RESERVE = `
local function gate(KEYS, ARGV)
${GATE}
end
local function reserve(KEYS, ARGV)
${RESERVE}
end
local gateKeys, gateArgs, ticketTtl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local reserveKeys = #KEYS
if ticketTtl > 0 then reserveKeys = reserveKeys - 1 end
local gk, ga, rk, ra = {}, {}, {}, {}
for i = 1, reserveKeys do
  if i <= gateKeys then gk[#gk + 1] = KEYS[i] else rk[#rk + 1] = KEYS[i] end
end
for i = 4, #ARGV do
  if i < 4 + gateArgs then ga[#ga + 1] = ARGV[i] else ra[#ra + 1] = ARGV[i] end
end
local gated, reserved = gate(gk, ga), reserve(rk, ra)
if ticketTtl > 0 and gated[1] == 1 and reserved[1] == 1 then
  redis.call('SET', KEYS[#KEYS], '1', 'PX', ticketTtl)
end
return { gated, reserved }
`

/**
 * KEYS: B, H, E, P. ARGV: holdId, chargeId, amount, actual, now, memoryMs, mode ("settle" | "release").
 * A settle charges once per charge id: to `spent`, or to P while unseeded. The last two elements
 * say whether this call applied the charge (1) or found it applied (0), and what the charge id was
 * charged (-1: not known, or a release).
 * {0, applied, charge} unseeded | {1, spent, reserved, granted, applied, charge}
 */
export const FINISH = SWEEP + `
local now = tonumber(ARGV[5])
local memory = tonumber(ARGV[6])
sweep(KEYS[1], KEYS[2], KEYS[3], ARGV[5])
-- Read once: the writes below keep it current from HINCRBY's answers (only SEED seeds a budget).
local spent, reserved, granted = state(KEYS[1])
local isSeeded = spent ~= nil
local applied = 0
local charge = -1
local settle = ARGV[7] == 'settle'
-- The hold and (a settle's) charge id in one read, before the hold is marked: the two ids may be
-- one. A release charges nothing: no read of a charge id (c stays false).
local v, c = false, false
if settle then
  local got = redis.call('HMGET', KEYS[2], ARGV[1], ARGV[2])
  v, c = got[1], got[2]
else
  v = redis.call('HGET', KEYS[2], ARGV[1])
end
if isDone(c) then charge = tonumber(string.sub(c, 2)) or -1 end
if not isDone(v) then
  if v then reserved = redis.call('HINCRBY', KEYS[1], 'reserved', 0 - tonumber(v)) end
  local forgetAt = now + memory
  if settle and not isDone(c) then
    charge = math.max(0, math.min(tonumber(ARGV[4]), tonumber(ARGV[3])))
    if isSeeded then
      spent = redis.call('HINCRBY', KEYS[1], 'spent', charge)
    else
      redis.call('HSET', KEYS[4], ARGV[2], charge)
    end
    -- Both ids done in one write to each key. When they are one id, the later pair wins, as a
    -- second write would: it is remembered with what it charged.
    redis.call('HSET', KEYS[2], ARGV[1], 'd', ARGV[2], 'd' .. charge)
    redis.call('ZADD', KEYS[3], forgetAt, ARGV[1], forgetAt, ARGV[2])
    applied = 1
  else
    done(KEYS[2], KEYS[3], ARGV[1], forgetAt)
  end
  -- A seeded budget's H and E carry B's expiry from whatever wrote them first (RESERVE, SEED or
  -- keep), and writes to a key keep its expiry: with the hold found, both existed, so only a
  -- settle of a lost hold (or an unseeded budget, whose keys live memoryMs after each write) keeps.
  if not (isSeeded and v) then keep(KEYS, memory, isSeeded) end
end
if not isSeeded then return { 0, applied, charge } end
return { 1, spent, reserved, granted, applied, charge }
`

/**
 * KEYS: B, H, E, P. ARGV: id, amount, expiresAt, memoryMs. Keeps a running call's hold; re-adds a
 * lost one, on an unseeded budget too (the seed keeps it).
 */
export const RENEW_HOLD = SWEEP + `
local v = redis.call('HGET', KEYS[2], ARGV[1])
if isDone(v) then return 0 end
if not v then
  redis.call('HINCRBY', KEYS[1], 'reserved', tonumber(ARGV[2]))
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
end
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
keep(KEYS, tonumber(ARGV[4]), seeded(KEYS[1]))
return 1
`

/** KEYS: B, H, E, P. ARGV: charge id, amount, now, memoryMs. A pending charge, on an unseeded budget only. */
export const CHARGE = SWEEP + `
if seeded(KEYS[1]) then return 0 end
if isDone(redis.call('HGET', KEYS[2], ARGV[1])) then return 0 end
redis.call('HSET', KEYS[4], ARGV[1], ARGV[2])
done(KEYS[2], KEYS[3], ARGV[1], tonumber(ARGV[3]) + tonumber(ARGV[4]), ARGV[2])
keep(KEYS, tonumber(ARGV[4]), false)
return 1
`

/**
 * KEYS: B, H, E, P, G. ARGV: now, spent, granted, expireAt, final (1|0), n, n counted ids, m,
 * m uncounted ids, grant ids… Seeds an unseeded budget: 1 seeded, 0 exists, -1 stale.
 */
export const SEED = SWEEP + `
if seeded(KEYS[1]) then return 0 end
sweep(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[1]))
local i = 6
local counted = {}
for j = 1, tonumber(ARGV[i]) do counted[ARGV[i + j]] = true end
i = i + tonumber(ARGV[i]) + 1
local uncounted = {}
for j = 1, tonumber(ARGV[i]) do uncounted[ARGV[i + j]] = true end
i = i + tonumber(ARGV[i]) + 1
local spent = tonumber(ARGV[2])
local pending = redis.call('HGETALL', KEYS[4])
for j = 1, #pending, 2 do
  local id = pending[j]
  if not counted[id] then
    if not uncounted[id] and ARGV[5] ~= '1' then return -1 end
    spent = spent + tonumber(pending[j + 1])
  end
end
-- Holds registered while unseeded stay; 'reserved' is recounted from them.
local reserved = 0
local holds = redis.call('HVALS', KEYS[2])
for _, v in ipairs(holds) do if not isDone(v) then reserved = reserved + tonumber(v) end end
redis.call('HSET', KEYS[1], 'spent', string.format('%d', spent), 'reserved', string.format('%d', reserved), 'granted', ARGV[3])
redis.call('DEL', KEYS[4], KEYS[5])
for j = i, #ARGV do redis.call('SADD', KEYS[5], ARGV[j]) end
local at = tonumber(ARGV[4])
if at > 0 then expire({ KEYS[1], KEYS[2], KEYS[3], KEYS[5] }, at)
else for j = 1, 3 do redis.call('PERSIST', KEYS[j]) end end
return 1
`

/** KEYS: B, G. ARGV: grant id, amount. Applies a credit grant once, on a seeded budget only. */
export const GRANT = `
if redis.call('HEXISTS', KEYS[1], 'spent') == 0 then return 0 end
if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[1], 'granted', tonumber(ARGV[2]))
return 1
`

/** KEYS: B, H, E. ARGV: now. {0} | {1, spent, reserved, granted} */
export const STATE = SWEEP + `
if redis.call('HEXISTS', KEYS[1], 'spent') == 0 then return { 0 } end
sweep(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[1]))
local spent, reserved, granted = state(KEYS[1])
return { 1, spent, reserved, granted }
`

/** KEYS: epoch hash. ARGV: id, fenceUntil. Creates the store's epoch unless one exists. {id, fenceUntil} */
export const EPOCH_INIT = `
if redis.call('HSETNX', KEYS[1], 'id', ARGV[1]) == 1 then redis.call('HSET', KEYS[1], 'fence', ARGV[2]) end
return redis.call('HMGET', KEYS[1], 'id', 'fence')
`
