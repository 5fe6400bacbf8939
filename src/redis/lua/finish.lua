#!lua
-- finish.lua: mirror a final state decided in MySQL onto the Redis reservation,
-- returning stock and the user's quota exactly once however often it runs.
--
-- KEYS[1] sku hash  KEYS[2] reservation hash  KEYS[3] buyer hash (`n` live units,
--         `x` holds lapsed unpaid)
-- ARGV[1] final status: CONFIRMED | RELEASED | REJECTED
-- ARGV[2] user_id  ARGV[3] count  ARGV[4] record ttl ms (for a tombstone)
-- ARGV[5] sold-out Pub/Sub channel  ARGV[6] event subject (`<sku>` or `<sku>.<bucket>`)
-- ARGV[7] '1' when a rejection leaves the unit in MySQL's stock (LIMIT_EXCEEDED)
-- ARGV[8] the SKU's bucket count the caller routed with: a bucket hash that
--         says otherwise answers {'LAYOUT'} and nothing is written
-- ARGV[9] '1' when the release is an expiry (reason EXPIRED): the hold lapsed
--         unpaid, and the buyer's `x` counts it (reserve.lua and order.lua
--         refuse a buyer whose `x` reached `limits.max_lapsed_holds`)
-- ARGV[10] '1' when the caller routed with a cached split layout: a bucket
--         hash that is gone may mean the layout shrank since (a re-split), the
--         record living in the buyer's new bucket, so the script answers
--         {'LAYOUT'} with nothing written and the caller reads the layout
--         again ('0' from a fresh read: the hash is gone, the finish goes on
--         as before), as order_release.lua does
--
-- RESERVED -> RELEASED  : available += count, user -= count
-- RESERVED -> REJECTED  : user -= count (OVER_ADMITTED: MySQL never had the unit,
--                         Redis was ahead); with ARGV[7] also available += count,
--                         and the record is marked `returned` so the reconciler's
--                         snapshot no longer counts it as holding stock
-- RESERVED -> CONFIRMED : status only
-- An expiry (ARGV[9]) also adds 1 to the buyer's `x`, once: on the transition,
-- or with the tombstone when the record was gone (its lapse was never counted).
-- `x` lives as long as the buyer's hash: the expiry reserve.lua gave it (time
-- to pay + retention, from the last admission), or that lifetime from now if
-- the hash had none (it was gone too).
-- Returns {'APPLIED'} on the transition, {'ALREADY', status} when the record is
-- already final, {'TOMBSTONE'} when no record existed (Redis lost it or it
-- expired): a tombstone with the final status is written so a replay of the
-- request id answers that status, and nothing is returned to stock — the
-- reconciler settles the counters.

local sku_key, res_key, user_key = KEYS[1], KEYS[2], KEYS[3]
local final, user_id, count = ARGV[1], ARGV[2], tonumber(ARGV[3])

local function count_lapse()
  if final == 'RELEASED' and ARGV[9] == '1' then
    redis.call('HINCRBY', user_key, 'x', 1)
    redis.call('PEXPIRE', user_key, ARGV[4], 'NX')
  end
end

if redis.call('EXISTS', sku_key) == 1 then
  if (redis.call('HGET', sku_key, 'buckets') or '1') ~= (ARGV[8] or '1') then
    return {'LAYOUT'}
  end
elseif ARGV[10] == '1' then
  return {'LAYOUT'}
end

local status = redis.call('HGET', res_key, 'status')
if not status then
  redis.call('HSET', res_key, 'user', user_id, 'count', ARGV[3], 'status', final,
    'created_ms', '0', 'expires_ms', '0')
  redis.call('PEXPIRE', res_key, tonumber(ARGV[4]))
  count_lapse()
  return {'TOMBSTONE'}
end
if status ~= 'RESERVED' then
  return {'ALREADY', status}
end

redis.call('HSET', res_key, 'status', final)
if final == 'RELEASED' or final == 'REJECTED' then
  -- `n` goes with its last unit; the rate limit's `t` stays (the hash goes
  -- when its last field does)
  local held = tonumber(redis.call('HGET', user_key, 'n'))
  if held then
    if held - count <= 0 then
      redis.call('HDEL', user_key, 'n')
    else
      redis.call('HINCRBY', user_key, 'n', -count)
    end
  end
  count_lapse()
end
local restock = final == 'RELEASED' or (final == 'REJECTED' and ARGV[7] == '1')
if final == 'REJECTED' and ARGV[7] == '1' then
  redis.call('HSET', res_key, 'returned', '1')
end
if restock and redis.call('HEXISTS', sku_key, 'available') == 1 then
  local available = redis.call('HINCRBY', sku_key, 'available', count)
  if available > 0 and redis.call('HDEL', sku_key, 'soldout') == 1 then
    -- stock is back: clear the marker and tell every api node
    redis.call('PUBLISH', ARGV[5], 'A:' .. ARGV[6])
  end
end
return {'APPLIED'}
