#!lua
-- reserve.lua: the whole admission decision of one reservation, atomically (docs/contract.md §2).
-- Reads and checks first, writes last: Lua has no rollback, so nothing is written
-- unless every check passed. The `#!lua` shebang makes Redis refuse the script
-- whole when it is out of memory, instead of failing half-way through the writes.
--
-- KEYS[1] sku hash        (available, limit, total)
-- KEYS[2] reservation hash
-- KEYS[3] buyer hash      (`n`: live units of this buyer for this SKU;
--                          `t`: next attempt time of the rate limit, `limits.per_user_*`)
-- KEYS[4] outbox stream
-- KEYS[5] winners set     (request ids that took stock; lets a sold-out api node
--                          tell a replay from a new request without calling Redis)
-- ARGV[1] request_id  ARGV[2] sku_id  ARGV[3] user_id  ARGV[4] count
-- ARGV[5] reservation ttl ms  ARGV[6] record retention ms  ARGV[7] outbox max length
-- ARGV[8] sold-out Pub/Sub channel
-- ARGV[9] buyer attempts per second (0 = no rate limit)  ARGV[10] buyer burst
-- ARGV[11] the SKU's bucket count the caller routed with  ARGV[12] event subject
--          (`<sku>`, or `<sku>.<bucket>` for a bucket of a split SKU)
--
-- A split SKU (redis/buckets): this script runs on the buyer's bucket. A
-- bucket holds a leased share of the stock; when it cannot serve the request
-- and its `drained` flag is not set (the pool has not yet answered empty), the
-- answer is DRY: the caller leases more from the pool and retries. Only a
-- drained bucket answers SOLD_OUT/INSUFFICIENT and raises the sold-out flag.
-- With one bucket there is no pool: the bucket is always "drained".
--
-- Every value returned is a string so no number loses precision on the way out.

local sku_key, res_key, buyer_key, outbox_key, winners_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local request_id, sku_id, user_id = ARGV[1], ARGV[2], ARGV[3]

-- 0. the caller's layout must be this bucket's: a stale cache re-routes
local sku = redis.call('HMGET', sku_key, 'available', 'limit', 'buckets', 'drained')
local buckets = sku[3] or '1'
if sku[1] and buckets ~= (ARGV[11] or '1') then
  return {'LAYOUT', buckets}
end
local split = buckets ~= '1'
local drained = (not split) or sku[4] == '1'
local count = tonumber(ARGV[4])
local ttl_ms = tonumber(ARGV[5])
local retention_ms = tonumber(ARGV[6])
local outbox_max = tonumber(ARGV[7])

-- 1. idempotent replay: the stored outcome wins, a different user/count is a mismatch
local prior = redis.call('HMGET', res_key, 'user', 'count', 'status', 'created_ms', 'expires_ms')
if prior[1] then
  if prior[1] ~= user_id or tonumber(prior[2]) ~= count then
    return {'MISMATCH'}
  end
  return {'REPLAY', prior[3], prior[4], prior[5]}
end

-- 2. a SKU that is not loaded is refused: never read a missing key as 0 or
-- unlimited, and never create a key for it (not even the rate limit's)
if not sku[1] or not sku[2] then
  return {'NOT_LOADED'}
end
local available = tonumber(sku[1])
local limit = tonumber(sku[2])

local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local buyer = redis.call('HMGET', buyer_key, 'n', 't')
local bought = tonumber(buyer[1] or '0')

-- 3. the buyer's rate limit, after the replay check (a replay is never limited).
-- GCRA, the token bucket kept as one number: the buyer's theoretical arrival
-- time (TAT, field `t`). Each attempt moves it one emission interval
-- (1000/rps ms) later; an attempt more than `burst - 1` intervals ahead of now
-- is refused and writes nothing. An allowed attempt counts whatever the checks
-- below decide (it is an attempt), so a bot cannot probe for free. The TAT
-- lives in the buyer's hash beside the live-unit count, so an admitted
-- reservation writes both in the one HSET it needs anyway: the limit costs no
-- extra command on the way to a reservation.
local rps, burst = tonumber(ARGV[9]), tonumber(ARGV[10])
local next_tat = nil
if rps > 0 then
  local interval = 1000 / rps
  local tat = math.max(tonumber(buyer[2] or '0') or 0, now_ms)
  local ahead = tat - now_ms
  local tolerance = (burst - 1) * interval
  if ahead > tolerance then
    return {'RATE_LIMITED', string.format('%.0f', math.ceil(ahead - tolerance))}
  end
  next_tat = tat + interval
end

-- A refusal below still records the attempt (rate limit on). A hash holding
-- only `t` expires once the TAT lies in the past, so memory is bounded by the
-- active buyers; one that also holds `n` keeps the longer expiry of its units.
local function refuse(reply)
  if next_tat then
    redis.call('HSET', buyer_key, 't', string.format('%.3f', next_tat))
    if not buyer[1] then
      redis.call('PEXPIRE', buyer_key, math.ceil(next_tat - now_ms) + 1000)
    end
  end
  return reply
end

-- 4. per-user limit, from SKU config held in Redis
if bought + count > limit then
  return refuse({'LIMIT', string.format('%.0f', bought), string.format('%.0f', limit)})
end

-- 5. stock (a split bucket that is not drained asks for a lease first)
if available < count and not drained then
  return {'DRY', string.format('%.0f', available)}
end
if available < count then
  if available <= 0 then
    return refuse({'SOLD_OUT'})
  end
  return refuse({'INSUFFICIENT', string.format('%.0f', available)})
end

-- bounded outbox: when the broker stops confirming, refuse instead of growing forever
if redis.call('XLEN', outbox_key) >= outbox_max then
  return refuse({'BACKPRESSURE'})
end

-- 6. writes; one clock (Redis TIME, read above) for every api node
local created = string.format('%.0f', now_ms)
local expires = string.format('%.0f', now_ms + ttl_ms)
local left = redis.call('HINCRBY', sku_key, 'available', -count)
local units = string.format('%.0f', bought + count)
if next_tat then
  redis.call('HSET', buyer_key, 'n', units, 't', string.format('%.3f', next_tat))
else
  redis.call('HSET', buyer_key, 'n', units)
end
redis.call('PEXPIRE', buyer_key, ttl_ms + retention_ms)
redis.call('HSET', res_key, 'user', user_id, 'count', ARGV[4], 'status', 'RESERVED',
  'created_ms', created, 'expires_ms', expires)
redis.call('PEXPIRE', res_key, ttl_ms + retention_ms)
redis.call('SADD', winners_key, request_id)
redis.call('PEXPIRE', winners_key, ttl_ms + retention_ms)
if left <= 0 and drained then
  -- durable marker + broadcast: every api node flags the SKU (bucket) sold out locally
  redis.call('HSET', sku_key, 'soldout', '1')
  redis.call('PUBLISH', ARGV[8], 'S:' .. (ARGV[12] or sku_id))
end
local entry = redis.call('XADD', outbox_key, '*', 'request_id', request_id, 'sku_id', sku_id,
  'user_id', user_id, 'count', ARGV[4], 'created_ms', created, 'expires_ms', expires)
return {'OK', string.format('%.0f', left), created, expires, entry}
