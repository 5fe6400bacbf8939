#!lua
-- order_hold.lua: step 2 of an order held line by line: one line, on its
-- SKU's slot (the buyer's bucket of a split SKU), held exactly as a single
-- reservation whose request id is the order id would be (the record, the
-- buyer's live units, the stock, the winners set, the sold-out marker),
-- tagged with the order id and the attempt, and with no outbox entry: the
-- order's one entry is written by the commit (order_commit.lua).
--
-- Anti-suspension: a hold that arrives after its attempt was undone must not
-- hold. Two checks refuse it: the attempt's deadline (ARGV[11], written by
-- order_intent.lua) by this node's clock — past it the commit refuses too
-- (LATE), so no hold of the attempt can be of use — and, before it, the
-- tombstone `otomb:<order>` (the highest attempt undone) that the undo
-- (order_release.lua) writes on the slot of every line whose hold was sent.
-- The deadline bounds how long a tombstone must live: until the deadline,
-- by this clock, plus a margin.
--
-- KEYS[1] sku (bucket) hash  KEYS[2] reservation hash  KEYS[3] buyer hash
-- KEYS[4] winners set  KEYS[5] tombstone
-- ARGV[1] order_id  ARGV[2] user_id  ARGV[3] count  ARGV[4] attempt
-- ARGV[5] created_ms  ARGV[6] expires_ms (the intent's, shared by every line)
-- ARGV[7] record lifetime ms  ARGV[8] sold-out channel  ARGV[9] event subject
-- ARGV[10] the bucket count the caller routed with
-- ARGV[11] the attempt's deadline ms (Redis time)
-- ARGV[12] lapsed holds that refuse the buyer (`limits.max_lapsed_holds`, the
--          buyer hash's `x` that finish.lua counts, as in reserve.lua; 0 = off)
--
-- Returns {'OK', available_after}, {'HELD', available} (this attempt held
-- it already: a re-sent call), {'ABORTED'} (the attempt was undone, or
-- its deadline passed),
-- {'MISMATCH'} (a record of this id that is not this attempt's),
-- {'NOT_LOADED'}, {'LAPSED', lapsed, cap}, {'LIMIT', bought, limit},
-- {'DRY', left} (a split bucket that is not drained: lease first),
-- {'SOLD_OUT'}, {'INSUFFICIENT', left}, {'LAYOUT', buckets}.

local sku_key, res_key, buyer_key, winners_key, tomb_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local order_id, user_id, count_arg, attempt = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local count = tonumber(count_arg)
local record_ms = tonumber(ARGV[7])

local sku = redis.call('HMGET', sku_key, 'available', 'limit', 'buckets', 'drained')
local buckets = sku[3] or '1'
if sku[1] and buckets ~= ARGV[10] then
  return {'LAYOUT', buckets}
end
if tonumber(redis.call('GET', tomb_key) or '0') >= tonumber(attempt) then
  return {'ABORTED'}
end
local t = redis.call('TIME')
if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) > tonumber(ARGV[11]) then
  return {'ABORTED'}
end
local prior = redis.call('HMGET', res_key, 'user', 'order', 'attempt')
if prior[1] then
  if prior[2] == order_id and prior[3] == attempt then
    return {'HELD', string.format('%.0f', tonumber(sku[1] or '0'))}
  end
  return {'MISMATCH'}
end
if not (sku[1] and sku[2]) then
  return {'NOT_LOADED'}
end
local drained = buckets == '1' or sku[4] == '1'
local available, limit = tonumber(sku[1]), tonumber(sku[2])
local buyer = redis.call('HMGET', buyer_key, 'n', 'x')
local max_lapsed = tonumber(ARGV[12] or '0')
if max_lapsed > 0 and buyer[2] and tonumber(buyer[2]) >= max_lapsed then
  return {'LAPSED', buyer[2], ARGV[12]}
end
local bought = tonumber(buyer[1] or '0')
if bought + count > limit then
  return {'LIMIT', string.format('%.0f', bought), string.format('%.0f', limit)}
end
if available < count then
  if not drained then
    return {'DRY', string.format('%.0f', available)}
  end
  if available <= 0 then
    return {'SOLD_OUT'}
  end
  return {'INSUFFICIENT', string.format('%.0f', available)}
end

local left = redis.call('HINCRBY', sku_key, 'available', -count)
redis.call('HSET', buyer_key, 'n', string.format('%.0f', bought + count))
redis.call('PEXPIRE', buyer_key, record_ms)
redis.call('HSET', res_key, 'user', user_id, 'count', count_arg, 'status', 'RESERVED',
  'created_ms', ARGV[5], 'expires_ms', ARGV[6], 'order', order_id, 'attempt', attempt)
redis.call('PEXPIRE', res_key, record_ms)
redis.call('SADD', winners_key, order_id)
redis.call('PEXPIRE', winners_key, record_ms)
if left <= 0 and drained then
  redis.call('HSET', sku_key, 'soldout', '1')
  redis.call('PUBLISH', ARGV[8], 'S:' .. ARGV[9])
end
return {'OK', string.format('%.0f', left)}
