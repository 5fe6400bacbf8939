#!lua
-- order.lua: the admission decision of a whole order on a standalone Redis
-- (docs/architecture.md, "Orders"): every line is held, or none is. One
-- script over every line's keys: standalone Redis runs it atomically
-- whatever hash tags the keys carry (a Redis Cluster would refuse it
-- CROSSSLOT; orders there need the intent protocol the architecture
-- describes). Reads and checks of every line first, writes last (Lua has
-- no rollback), so a refusal writes nothing at all; `#!lua` makes Redis
-- refuse the script whole when it is out of memory.
--
-- Each line is held exactly as a single reservation of its SKU is
-- (reserve.lua): the record `res:<order_id>` (plus `order`, the order id),
-- the buyer's live units `n` (so `limit_per_user` counts order lines and
-- single reservations together), the stock, the winners set, the sold-out
-- marker. The order has ONE outbox entry, in its shard's stream (the first
-- line's deduction carrying the whole line list, `order`), as an order held
-- line by line has (order_commit.lua): one XADD and one XDEL per order, and
-- a relay that reads only the SKUs' streams (a release before orders) never
-- sees an order.
--
-- KEYS[1] order record (`<p>{oi:<n>}:order:<order_id>`: user, lines, status,
--         created_ms, expires_ms, `v` its format: redis/orders.rs)
-- KEYS[2] the order shard's outbox stream (`<p>{oi:<n>}:outbox`)
-- then per line i (1-based, lines sorted by SKU id):
-- KEYS[4i-1] sku hash  KEYS[4i] reservation hash  KEYS[4i+1] buyer hash
-- KEYS[4i+2] winners set
-- ARGV[1] order_id  ARGV[2] user_id  ARGV[3] reservation ttl ms
-- ARGV[4] record retention ms  ARGV[5] outbox max length
-- ARGV[6] sold-out Pub/Sub channel  ARGV[7] the line list (`sku:count,...`)
-- then per line i: ARGV[6+2i] sku_id  ARGV[7+2i] count
--
-- Returns:
--   {'OK', created_ms, expires_ms, entry_id, available_1, ..., available_n}
--   {'REPLAY', status, created_ms, expires_ms}   the order was held before
--   {'MISMATCH'}        the order id was used with another user or other lines,
--                       or a line's SKU already has a reservation of that id
--   {'REFUSED', i, why, a, b}  line i cannot be held: why is NOT_LOADED,
--                       SPLIT (a split SKU: not on this path), LIMIT (a =
--                       bought, b = limit), SOLD_OUT, INSUFFICIENT (a = left)
--   {'BACKPRESSURE'}    the order shard's outbox is full
--   {'BUSY'}            an attempt of the intent protocol holds this order id
-- Every value returned is a string, so no number loses precision.

local order_key, outbox_key = KEYS[1], KEYS[2]
local order_id, user_id = ARGV[1], ARGV[2]
local ttl_ms = tonumber(ARGV[3])
local retention_ms = tonumber(ARGV[4])
local outbox_max = tonumber(ARGV[5])
local channel = ARGV[6]
local lines_text = ARGV[7]
local n = (#ARGV - 7) / 2

-- 1. replay: the stored order wins; another user or other lines is a mismatch
-- (an attempt of the intent protocol, ops/order_saga.rs, shares the record:
-- one still holding or being undone is BUSY, one undone is no order)
local prior = redis.call('HMGET', order_key, 'user', 'lines', 'status', 'created_ms', 'expires_ms')
if prior[3] == 'HOLDING' or prior[3] == 'ABORTING' then
  return {'BUSY'}
end
if prior[1] and prior[3] ~= 'ABORTED' then
  if prior[1] ~= user_id or prior[2] ~= lines_text then
    return {'MISMATCH'}
  end
  return {'REPLAY', prior[3], prior[4], prior[5]}
end

-- 2. every line's checks, nothing written yet
local function key(i, k)
  return KEYS[4 * i - 2 + k]
end
if redis.call('XLEN', outbox_key) >= outbox_max then
  return {'BACKPRESSURE'}
end
local bought = {}
local left = {}
for i = 1, n do
  local count = tonumber(ARGV[7 + 2 * i])
  local sku = redis.call('HMGET', key(i, 1), 'available', 'limit', 'buckets')
  if not (sku[1] and sku[2]) then
    return {'REFUSED', tostring(i), 'NOT_LOADED'}
  end
  if (sku[3] or '1') ~= '1' then
    return {'REFUSED', tostring(i), 'SPLIT'}
  end
  if redis.call('EXISTS', key(i, 2)) == 1 then
    return {'MISMATCH'}
  end
  local units = tonumber(redis.call('HGET', key(i, 3), 'n') or '0')
  local limit = tonumber(sku[2])
  if units + count > limit then
    return {'REFUSED', tostring(i), 'LIMIT', string.format('%.0f', units), string.format('%.0f', limit)}
  end
  local available = tonumber(sku[1])
  if available < count then
    if available <= 0 then
      return {'REFUSED', tostring(i), 'SOLD_OUT'}
    end
    return {'REFUSED', tostring(i), 'INSUFFICIENT', string.format('%.0f', available)}
  end
  bought[i] = units
  left[i] = available - count
end

-- 3. every line held, then the order record
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local created = string.format('%.0f', now_ms)
local expires = string.format('%.0f', now_ms + ttl_ms)
local record_ms = ttl_ms + retention_ms
local first_sku, first_count = ARGV[8], ARGV[9]
local entry = redis.call('XADD', outbox_key, '*', 'request_id', order_id, 'sku_id', first_sku,
  'user_id', user_id, 'count', first_count, 'created_ms', created, 'expires_ms', expires,
  'order', lines_text)
local reply = {'OK', created, expires, entry}
for i = 1, n do
  local sku_id, count = ARGV[6 + 2 * i], ARGV[7 + 2 * i]
  redis.call('HINCRBY', key(i, 1), 'available', -tonumber(count))
  redis.call('HSET', key(i, 3), 'n', string.format('%.0f', bought[i] + tonumber(count)))
  redis.call('PEXPIRE', key(i, 3), record_ms)
  redis.call('HSET', key(i, 2), 'user', user_id, 'count', count, 'status', 'RESERVED',
    'created_ms', created, 'expires_ms', expires, 'order', order_id)
  redis.call('PEXPIRE', key(i, 2), record_ms)
  redis.call('SADD', key(i, 4), order_id)
  redis.call('PEXPIRE', key(i, 4), record_ms)
  if left[i] <= 0 then
    redis.call('HSET', key(i, 1), 'soldout', '1')
    redis.call('PUBLISH', channel, 'S:' .. sku_id)
  end
  reply[#reply + 1] = string.format('%.0f', left[i])
end
redis.call('HSET', order_key, 'user', user_id, 'lines', lines_text, 'status', 'RESERVED',
  'created_ms', created, 'expires_ms', expires, 'v', '1')
redis.call('PEXPIRE', order_key, record_ms)
return reply
