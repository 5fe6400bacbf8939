#!lua
-- reserve.lua: the whole admission decision of one reservation, atomically (SPEC §2).
-- Reads and checks first, writes last: Lua has no rollback, so nothing is written
-- unless every check passed. The `#!lua` shebang makes Redis refuse the script
-- whole when it is out of memory, instead of failing half-way through the writes.
--
-- KEYS[1] sku hash        (available, limit, total)
-- KEYS[2] reservation hash
-- KEYS[3] user counter    (live units of this user for this SKU)
-- KEYS[4] outbox stream
-- KEYS[5] winners set     (request ids that took stock; lets a sold-out api node
--                          tell a replay from a new request without calling Redis)
-- KEYS[6] buyer's rate limit (GCRA arrival time of attempts, `limits.per_user_*`)
-- ARGV[1] request_id  ARGV[2] sku_id  ARGV[3] user_id  ARGV[4] count
-- ARGV[5] reservation ttl ms  ARGV[6] record retention ms  ARGV[7] outbox max length
-- ARGV[8] sold-out Pub/Sub channel
-- ARGV[9] buyer attempts per second (0 = no rate limit)  ARGV[10] buyer burst
--
-- Every value returned is a string so no number loses precision on the way out.

local sku_key, res_key, user_key, outbox_key, winners_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local rate_key = KEYS[6]
local request_id, sku_id, user_id = ARGV[1], ARGV[2], ARGV[3]
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

local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- 1b. the buyer's rate limit, after the replay check (a replay is never limited).
-- GCRA, the token bucket kept as one number: the buyer's theoretical arrival
-- time (TAT). Each attempt moves it one emission interval (1000/rps ms) later;
-- an attempt more than `burst - 1` intervals ahead of now is refused and writes
-- nothing. An allowed attempt counts whatever the checks below decide (it is an
-- attempt), so a bot cannot probe for free. One GET and one SET per attempt.
local rps, burst = tonumber(ARGV[9]), tonumber(ARGV[10])
if rps > 0 then
  local interval = 1000 / rps
  local tat = math.max(tonumber(redis.call('GET', rate_key) or '0') or 0, now_ms)
  local ahead = tat - now_ms
  local tolerance = (burst - 1) * interval
  if ahead > tolerance then
    return {'RATE_LIMITED', string.format('%.0f', math.ceil(ahead - tolerance))}
  end
  local next_tat = tat + interval
  -- forgotten once it lies in the past: memory is bounded by the active buyers
  redis.call('SET', rate_key, string.format('%.3f', next_tat), 'PX',
    math.ceil(next_tat - now_ms) + 1000)
end

-- 2. a SKU that is not loaded is refused: never read a missing key as 0 or unlimited
local sku = redis.call('HMGET', sku_key, 'available', 'limit')
if not sku[1] or not sku[2] then
  return {'NOT_LOADED'}
end
local available = tonumber(sku[1])
local limit = tonumber(sku[2])

-- 3. per-user limit, from SKU config held in Redis
local bought = tonumber(redis.call('GET', user_key) or '0')
if bought + count > limit then
  return {'LIMIT', string.format('%.0f', bought), string.format('%.0f', limit)}
end

-- 4. stock
if available < count then
  if available <= 0 then
    return {'SOLD_OUT'}
  end
  return {'INSUFFICIENT', string.format('%.0f', available)}
end

-- bounded outbox: when the broker stops confirming, refuse instead of growing forever
if redis.call('XLEN', outbox_key) >= outbox_max then
  return {'BACKPRESSURE'}
end

-- 5. writes; one clock (Redis TIME, read above) for every api node
local created = string.format('%.0f', now_ms)
local expires = string.format('%.0f', now_ms + ttl_ms)
local left = redis.call('HINCRBY', sku_key, 'available', -count)
redis.call('INCRBY', user_key, count)
redis.call('PEXPIRE', user_key, ttl_ms + retention_ms)
redis.call('HSET', res_key, 'user', user_id, 'count', ARGV[4], 'status', 'RESERVED',
  'created_ms', created, 'expires_ms', expires)
redis.call('PEXPIRE', res_key, ttl_ms + retention_ms)
redis.call('SADD', winners_key, request_id)
redis.call('PEXPIRE', winners_key, ttl_ms + retention_ms)
if left <= 0 then
  -- durable marker + broadcast: every api node flags the SKU sold out locally
  redis.call('HSET', sku_key, 'soldout', '1')
  redis.call('PUBLISH', ARGV[8], 'S:' .. sku_id)
end
local entry = redis.call('XADD', outbox_key, '*', 'request_id', request_id, 'sku_id', sku_id,
  'user_id', user_id, 'count', ARGV[4], 'created_ms', created, 'expires_ms', expires)
return {'OK', string.format('%.0f', left), created, expires, entry}
