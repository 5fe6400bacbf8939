#!lua
-- finish.lua: mirror final states decided in MySQL onto Redis reservation
-- records of one SKU bucket, returning stock and each buyer's quota exactly
-- once however often it runs. One reservation (a confirm, a cancel) or many
-- (a batch of expiries, `lifecycle::expire_many`): the same rules, one call.
--
-- KEYS[1] sku hash; then per reservation i (1-based):
--   KEYS[2i] reservation hash  KEYS[2i+1] buyer hash (`n` live units, `x`
--   holds lapsed unpaid)
-- ARGV[1] final status of every reservation: CONFIRMED | RELEASED | REJECTED
-- ARGV[2] record ttl ms (for a tombstone)
-- ARGV[3] sold-out Pub/Sub channel  ARGV[4] event subject (`<sku>` or `<sku>.<bucket>`)
-- ARGV[5] '1' when a rejection leaves the unit in MySQL's stock (LIMIT_EXCEEDED)
-- ARGV[6] the SKU's bucket count the caller routed with: a bucket hash that
--         says otherwise answers {'LAYOUT'} and nothing is written
-- ARGV[7] '1' when the release is an expiry (reason EXPIRED): the hold lapsed
--         unpaid, and the buyer's `x` counts it (reserve.lua and order.lua
--         refuse a buyer whose `x` reached `limits.max_lapsed_holds`)
-- ARGV[8] '1' when the caller routed with a cached split layout: a bucket
--         hash that is gone may mean the layout shrank since (a re-split), the
--         record living in the buyer's new bucket, so the script answers
--         {'LAYOUT'} with nothing written and the caller reads the layout
--         again ('0' from a fresh read: the hash is gone, the finish goes on
--         as before), as order_release.lua does
-- then per reservation i: ARGV[7+2i] user_id  ARGV[8+2i] count
--
-- RESERVED -> RELEASED  : available += count, user -= count
-- RESERVED -> REJECTED  : user -= count (OVER_ADMITTED: MySQL never had the unit,
--                         Redis was ahead); with ARGV[5] also available += count,
--                         and the record is marked `returned` so the reconciler's
--                         snapshot no longer counts it as holding stock
-- RESERVED -> CONFIRMED : status only
-- An expiry (ARGV[7]) also adds 1 to the buyer's `x`, once: on the transition,
-- or with the tombstone when the record was gone (its lapse was never counted).
-- `x` lives as long as the buyer's hash: the expiry reserve.lua gave it (time
-- to pay + retention, from the last admission), or that lifetime from now if
-- the hash had none (it was gone too).
-- The sold-out marker is cleared and broadcast once per call, after every
-- unit came back.
-- Returns one word per reservation, in order: 'APPLIED' on the transition,
-- 'ALREADY' when the record is already final, 'TOMBSTONE' when no record
-- existed (Redis lost it or it expired): a tombstone with the final status is
-- written so a replay of the request id answers that status, and nothing is
-- returned to stock — the reconciler settles the counters. {'LAYOUT'} alone
-- when the bucket check failed.

local sku_key = KEYS[1]
local final, ttl_ms = ARGV[1], ARGV[2]
local lapses = final == 'RELEASED' and ARGV[7] == '1'
local returns = final == 'REJECTED' and ARGV[5] == '1'
local restocks = final == 'RELEASED' or returns

if redis.call('EXISTS', sku_key) == 1 then
  if (redis.call('HGET', sku_key, 'buckets') or '1') ~= (ARGV[6] or '1') then
    return {'LAYOUT'}
  end
elseif ARGV[8] == '1' then
  return {'LAYOUT'}
end

local function count_lapse(user_key)
  if lapses then
    redis.call('HINCRBY', user_key, 'x', 1)
    redis.call('PEXPIRE', user_key, ttl_ms, 'NX')
  end
end

-- One reservation; returns its word.
local function finish_one(res_key, user_key, user_id, count_arg)
  local count = tonumber(count_arg)
  local status = redis.call('HGET', res_key, 'status')
  if not status then
    redis.call('HSET', res_key, 'user', user_id, 'count', count_arg, 'status', final,
      'created_ms', '0', 'expires_ms', '0')
    redis.call('PEXPIRE', res_key, tonumber(ttl_ms))
    count_lapse(user_key)
    return 'TOMBSTONE', 0
  end
  if status ~= 'RESERVED' then
    return 'ALREADY', 0
  end
  redis.call('HSET', res_key, 'status', final)
  if final == 'RELEASED' or final == 'REJECTED' then
    -- `n` goes with its last unit; the rate limit's `t` stays (the hash goes
    -- when its last field does)
    buyer_give_back(user_key, count)
    count_lapse(user_key)
  end
  if returns then
    redis.call('HSET', res_key, 'returned', '1')
  end
  if restocks then
    return 'APPLIED', count
  end
  return 'APPLIED', 0
end

local words, back = {}, 0
for i = 1, (#KEYS - 1) / 2 do
  local word, units = finish_one(KEYS[2 * i], KEYS[2 * i + 1], ARGV[7 + 2 * i], ARGV[8 + 2 * i])
  words[i] = word
  back = back + units
end
if back > 0 and redis.call('HEXISTS', sku_key, 'available') == 1 then
  local available = redis.call('HINCRBY', sku_key, 'available', back)
  if available > 0 then
    -- stock is back: clear the marker and tell every api node
    soldout_clear(sku_key, ARGV[3], ARGV[4])
  end
end
return words
