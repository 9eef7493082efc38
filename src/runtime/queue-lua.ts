/**
 * Lua scripts of the Redis capacity queues (`redis-capacity-queues.ts`). Each one runs atomically
 * on the server and applies the rules of `machines/queue.ts` to one placement, so the instances
 * sharing a Redis can never grant more slots than the placement's capacity between them.
 *
 * Keys of placement P, all with the hash tag `{P}` (one slot per placement):
 *   M    …cq:{P}:meta     hash: capacity, circuit (closed|open|halfOpen), failures, openedUntil,
 *                        probe (the half-open probe's waiter id, '' when none), hold (mean ms a
 *                        slot is held, for retry hints), opened (times the circuit opened)
 *   H    …cq:{P}:holders  zset waiterId → lease expiry (epoch ms): the slots in use
 *   R    …cq:{P}:ring     list of keyIds that have waiters; the head is served next
 *   W    …cq:{P}:waiters  hash waiterId → keyId
 *   A    …cq:{P}:alive    zset waiterId → liveness expiry, renewed by the waiter's instance
 *   L(k) …cq:{P}:lane:k   list of the waiterIds of key k, oldest first
 * Lane names are built in Lua from ARGV[1] (one list per key cannot be declared up front); they
 * share the `{P}` tag, so they live in the same slot as the declared keys.
 *
 * Batch priority (machines/queue.ts): a batch waiter's key id is sent as `!<keyId>`; its lane is
 * L(!k), and the keys with batch waiters form a ring of their own,
 *   RB   …cq:{P}:lane:!!ring     list, served only when R is empty,
 *   BH   …cq:{P}:lane:!!holders  set of the holders that are batch requests (at most capacity − 1,
 *                                or the one slot of a capacity-1 placement).
 * Key ids never start with `!`, so these names cannot collide with a lane.
 *
 * Holders and waiters carry expiries instead of key TTLs: every script first sweeps lapsed leases
 * and dead waiters (a crashed instance's), so they vanish at the next touch of the placement, and
 * Redis deletes a list, hash or zset once it is empty. M has no TTL: a few fields per configured
 * placement, rewritten at every start and re-seeded by any script if Redis lost it.
 *
 * Waiter ids are `<instanceId>/<n>`; a grant is published on `<channelPrefix><instanceId>` as
 * `<placementId>\n<waiterId>`.
 *
 * Common ARGV: lanePrefix, channelPrefix, placementId, now (epoch ms), leaseTtlMs, the configured
 * capacity. A script's own arguments start at ARGV[7].
 *
 * M is read once, at the start of every script (one HMGET of the fields the scripts read, into
 * `meta`), and every write to one of them goes through `setMeta`, which keeps that copy current
 * (the failures' HINCRBY sets it from its answer; `opened`, a count nobody reads here, is not
 * copied). Each read of a field was a command of its own (the circuit, the capacity twice, the
 * probe, the hold and failures), and every command a script issues costs Redis 1–4 µs beside its
 * own work (2026-12-01, a VM of a middle kind): an enqueue that finds a free slot now issues 9
 * commands instead of 11, a release 8 instead of 11.
 */

const PRELUDE = `
local M, H, R, W, A = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local lanePrefix, channelPrefix, placement = ARGV[1], ARGV[2], ARGV[3]
local now, leaseTtl = tonumber(ARGV[4]), tonumber(ARGV[5])
local RB, BH = lanePrefix .. '!!ring', lanePrefix .. '!!holders'
local function ringOf(k) if string.sub(k, 1, 1) == '!' then return RB end return R end
-- M's fields (false when absent), kept current: every write to one of them goes through setMeta
-- (or, for HINCRBY, sets the copy from its answer).
local meta = {}
do
  local got = redis.call('HMGET', M, 'capacity', 'circuit', 'openedUntil', 'probe', 'hold', 'failures')
  meta.capacity, meta.circuit, meta.openedUntil, meta.probe, meta.hold, meta.failures = got[1], got[2], got[3], got[4], got[5], got[6]
end
-- HSET of field, value pairs; the copy keeps each value as Redis returns it (a string).
local function setMeta(...)
  redis.call('HSET', M, ...)
  local fields = { ... }
  for i = 1, #fields, 2 do meta[fields[i]] = tostring(fields[i + 1]) end
end
-- The configured capacity seeds a placement Redis has forgotten (a restart without persistence);
-- it never overrides a stored one (a later config or setCapacity).
if not meta.capacity then
  setMeta('capacity', ARGV[6])
  if not meta.circuit then setMeta('circuit', 'closed') end
end

local function dropWaiter(w)
  local k = redis.call('HGET', W, w)
  if not k then return false end
  local lane = lanePrefix .. k
  redis.call('LREM', lane, 1, w)
  if redis.call('LLEN', lane) == 0 then redis.call('LREM', ringOf(k), 0, k) end
  redis.call('HDEL', W, w)
  redis.call('ZREM', A, w)
  return true
end

local function dropHolder(w)
  if redis.call('ZREM', H, w) == 0 then return false end
  redis.call('SREM', BH, w)
  if meta.probe == w then setMeta('probe', '') end
  return true
end

local function openCircuit(cooldown)
  setMeta('circuit', 'open', 'openedUntil', now + cooldown, 'probe', '', 'failures', 0)
  redis.call('HINCRBY', M, 'opened', 1)
end

-- The circuit now. An open circuit whose cooldown is over turns half-open here: this replaces
-- the in-process host's probe timer, and every instance sees the same moment.
local function circuit()
  if meta.circuit == 'open' and now >= tonumber(meta.openedUntil or 0) then
    setMeta('circuit', 'halfOpen', 'probe', '')
    return 'halfOpen'
  end
  return meta.circuit or 'closed'
end

-- Lapsed leases give their slot back (a lapsed probe is replaced); dead waiters leave their lane.
-- (ARGV's own string for now: a number would be formatted again for each command.)
local function sweep()
  for _, w in ipairs(redis.call('ZRANGEBYSCORE', H, '-inf', ARGV[4])) do dropHolder(w) end
  for _, w in ipairs(redis.call('ZRANGEBYSCORE', A, '-inf', ARGV[4])) do dropWaiter(w) end
end

-- Grants the free slots (half-open: one probe) round-robin between keys, FIFO within a key, and
-- announces each grant on the waiter's instance channel. With nobody waiting (both rings empty:
-- Redis deletes an empty list) there is nothing to grant: one EXISTS instead of the circuit's and
-- the capacity's reads (a circuit whose cooldown is over turns half-open at its next read instead).
local function grant()
  if redis.call('EXISTS', R, RB) == 0 then return 0 end
  local c = circuit()
  if c == 'open' then return 0 end
  local cap = tonumber(meta.capacity or 0)
  local free = cap - redis.call('ZCARD', H)
  if c == 'halfOpen' then
    if (meta.probe or '') ~= '' then return 0 end
    free = math.min(free, 1)
  end
  local batchCap = cap
  if cap >= 2 then batchCap = cap - 1 end
  local n = 0
  while n < free do
    -- Interactive waiters first; a batch waiter only while batch holds less than its cap.
    local ring = R
    local k = redis.call('LPOP', R)
    if not k then
      if redis.call('SCARD', BH) >= batchCap then break end
      ring = RB
      k = redis.call('LPOP', RB)
    end
    if not k then break end
    local lane = lanePrefix .. k
    local w = redis.call('LPOP', lane)
    if w then
      if redis.call('LLEN', lane) > 0 then redis.call('RPUSH', ring, k) end
      redis.call('HDEL', W, w)
      redis.call('ZREM', A, w)
      redis.call('ZADD', H, now + leaseTtl, w)
      if ring == RB then redis.call('SADD', BH, w) end
      if c == 'halfOpen' then setMeta('probe', w) end
      redis.call('PUBLISH', channelPrefix .. string.match(w, '^(.*)/'), placement .. '\\n' .. w)
      n = n + 1
    end
  end
  return n
end
`

/** ARGV: capacity. Stores the capacity (config at start, or a change) and grants what it frees. */
export const SET_CAPACITY = PRELUDE + `
setMeta('capacity', ARGV[7])
if not meta.circuit then setMeta('circuit', 'closed') end
sweep()
grant()
return 1
`

/**
 * ARGV: waiterId, keyId, waiterTtlMs, skipIfOpen ('1': an open circuit answers 2 and nothing is
 * enqueued, so the caller reads the circuit and joins in one round trip). Joins the back of the
 * key's lane. 1 = holds a slot now, 0 = waits.
 *
 * With a sixth key, the call's admission ticket (coordination/lua.ts GATE_AND_RESERVE, sent just
 * before on the same connection): it is taken, and without it nothing happens and the answer is 3
 * (not admitted, or not yet: the caller waits for its admission and enqueues again).
 */
export const ENQUEUE = PRELUDE + `
if KEYS[6] and redis.call('DEL', KEYS[6]) == 0 then return 3 end
local w, k = ARGV[7], ARGV[8]
sweep()
local c = circuit()
if ARGV[10] == '1' and c == 'open' then return 2 end
if not redis.call('ZSCORE', H, w) and redis.call('HEXISTS', W, w) == 0 then
  -- Nobody waits and a slot is free: it is this waiter's at once, as grant() would give it, but
  -- without the trip through a lane, the ring and a PUBLISH its own instance does not need.
  if c ~= 'open' and redis.call('EXISTS', R, RB) == 0 then
    local cap = tonumber(meta.capacity or 0)
    local free = cap - redis.call('ZCARD', H)
    if c == 'halfOpen' and (meta.probe or '') ~= '' then free = 0 end
    local batch = string.sub(k, 1, 1) == '!'
    local batchCap = cap
    if cap >= 2 then batchCap = cap - 1 end
    if free > 0 and (not batch or redis.call('SCARD', BH) < batchCap) then
      redis.call('ZADD', H, now + leaseTtl, w)
      if batch then redis.call('SADD', BH, w) end
      if c == 'halfOpen' then setMeta('probe', w) end
      return 1
    end
  end
  if redis.call('RPUSH', lanePrefix .. k, w) == 1 then redis.call('RPUSH', ringOf(k), k) end
  redis.call('HSET', W, w, k)
  redis.call('ZADD', A, now + tonumber(ARGV[9]), w)
end
grant()
if redis.call('ZSCORE', H, w) then return 1 end
return 0
`

/** ARGV: waiterId. Removes a waiter, or frees its slot without a health verdict. */
export const CANCEL = PRELUDE + `
sweep()
if not dropWaiter(ARGV[7]) then dropHolder(ARGV[7]) end
grant()
return 1
`

/**
 * ARGV: waiterId, outcome (success|failure), failureThreshold, cooldownMs, heldMs.
 * Frees the slot and judges health as the machine does: counted while closed, the probe's
 * verdict while half-open, uncounted otherwise. 0 = not a holder (released already or lapsed).
 */
export const RELEASE = PRELUDE + `
local w, success = ARGV[7], ARGV[8] == 'success'
sweep()
local c = circuit()
if not redis.call('ZSCORE', H, w) then
  grant()
  return 0
end
local wasProbe = meta.probe == w
local failures = tonumber(meta.failures or 0)
dropHolder(w)
local held = tonumber(ARGV[11])
local hold = tonumber(meta.hold or held)
setMeta('hold', math.floor(0.8 * hold + 0.2 * held))
if c == 'closed' then
  -- (A success resets the count; written only when there is one to reset.)
  if success then
    if failures ~= 0 then setMeta('failures', 0) end
  else
    failures = redis.call('HINCRBY', M, 'failures', 1)
    meta.failures = tostring(failures)
    if failures >= tonumber(ARGV[9]) then openCircuit(tonumber(ARGV[10])) end
  end
elseif c == 'halfOpen' and wasProbe then
  if success then setMeta('circuit', 'closed', 'failures', 0) else openCircuit(tonumber(ARGV[10])) end
end
grant()
return 1
`

/**
 * ARGV: waiterTtlMs, n, then n waiting ids, then the ids of leases to renew.
 * The instance's heartbeat and its guard against lost announcements. Renewal comes before the
 * sweep: an entry that lapsed during a stall but was not swept yet has not been given to anyone,
 * so keeping it is safe; XX never brings back an entry that is gone.
 * Returns one status per id: 1 holds a slot, 0 waiting, 2 unknown (gone or lapsed).
 */
export const SYNC = PRELUDE + `
local ttl, n = tonumber(ARGV[7]), tonumber(ARGV[8])
for i = 9, 8 + n do redis.call('ZADD', A, 'XX', now + ttl, ARGV[i]) end
for i = 9 + n, #ARGV do redis.call('ZADD', H, 'XX', now + leaseTtl, ARGV[i]) end
sweep()
grant()
local out = {}
for i = 9, #ARGV do
  if redis.call('ZSCORE', H, ARGV[i]) then out[#out + 1] = 1
  elseif redis.call('HEXISTS', W, ARGV[i]) == 1 then out[#out + 1] = 0
  else out[#out + 1] = 2 end
end
return out
`

/** Returns {capacity, inUse, circuit, then keyId, waiting per key in ring order}, after a sweep. */
export const VIEW = PRELUDE + `
sweep()
grant()
local out = { tonumber(meta.capacity or 0), redis.call('ZCARD', H), circuit() }
for _, ring in ipairs({ R, RB }) do
  for _, k in ipairs(redis.call('LRANGE', ring, 0, -1)) do
    out[#out + 1] = k
    out[#out + 1] = redis.call('LLEN', lanePrefix .. k)
  end
end
return out
`

/**
 * ARGV: waiterId. Changes nothing (but the seed). {ahead, capacity, holdMs}: grants that go to others before the
 * waiter (machines/queue.ts `positionOf`; -1 when not waiting) and the mean hold (-1: unknown).
 */
export const POSITION = PRELUDE + `
local cap = tonumber(meta.capacity or 0)
local hold = tonumber(meta.hold or -1)
local k = redis.call('HGET', W, ARGV[7])
if not k then return { -1, cap, hold } end
local round = redis.call('LPOS', lanePrefix .. k, ARGV[7])
if not round then return { -1, cap, hold } end
local ahead, before = 0, true
-- A batch waiter comes after every interactive waiter, then by its own ring.
local ring = ringOf(k)
if ring == RB then
  for _, key in ipairs(redis.call('LRANGE', R, 0, -1)) do ahead = ahead + redis.call('LLEN', lanePrefix .. key) end
end
for _, key in ipairs(redis.call('LRANGE', ring, 0, -1)) do
  if key == k then before = false end
  local len = redis.call('LLEN', lanePrefix .. key)
  ahead = ahead + math.min(len, round)
  if before and len > round then ahead = ahead + 1 end
end
return { ahead, cap, hold }
`
