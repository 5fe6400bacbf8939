#!lua
-- order_release.lua: the undo of one line of an aborted order attempt, on
-- the line's slot (the buyer's bucket of a split SKU). If the line's record
-- is this order's attempt and still held, its units go back to the stock
-- and the buyer's quota, the record and its winner go (a retry of the order
-- is a new attempt); the sold-out marker is cleared when stock is back. The
-- tombstone is written whether or not the line was held (an "empty
-- rollback" succeeds: the hold was sent, and may run after its answer was
-- lost), so a hold of this attempt that arrives later is refused
-- (order_hold.lua). The caller runs it only for lines whose hold was sent
-- (the sweeper, which cannot know, for every line). The tombstone lives
-- until the attempt's deadline by this node's clock plus a margin: past the
-- deadline the hold refuses itself by the same clock, so a longer life
-- guards nothing. Idempotent.
--
-- KEYS[1] sku (bucket) hash  KEYS[2] reservation hash  KEYS[3] buyer hash
-- KEYS[4] winners set  KEYS[5] tombstone  KEYS[6] pending hash (the hold's
-- note of its units, order_hold.lua: dropped with the units it notes)
-- ARGV[1] order_id  ARGV[2] attempt  ARGV[3] the attempt's deadline ms
-- ARGV[4] sold-out channel  ARGV[5] event subject
-- ARGV[6] the bucket count the caller routed with
-- ARGV[7] the tombstone's margin past the deadline, ms
-- ARGV[8] '1' when the caller routed with a cached split layout: a bucket
--         hash that is gone may mean the layout shrank since (a re-split),
--         so the script answers {'LAYOUT', '0'} with nothing written and the
--         caller reads the layout again ('0' from a fresh read: the hash is
--         gone, the undo goes on as before)
--
-- Returns {'RELEASED'}, {'NONE'} (nothing of this attempt held here) or
-- {'LAYOUT', buckets}.

local sku_key, res_key, buyer_key, winners_key, tomb_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local order_id, attempt = ARGV[1], ARGV[2]

local sku = redis.call('HMGET', sku_key, 'available', 'buckets')
if sku[1] and (sku[2] or '1') ~= ARGV[6] then
  return {'LAYOUT', sku[2] or '1'}
end
if ARGV[8] == '1' and redis.call('EXISTS', sku_key) == 0 then
  return {'LAYOUT', '0'}
end
if tonumber(redis.call('GET', tomb_key) or '0') < tonumber(attempt) then
  local t = redis.call('TIME')
  local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local life = math.max(tonumber(ARGV[3]) - now_ms, 0) + tonumber(ARGV[7])
  redis.call('SET', tomb_key, attempt, 'PX', life)
end
local r = redis.call('HMGET', res_key, 'order', 'attempt', 'status', 'count')
if r[1] ~= order_id or r[2] ~= attempt or r[3] ~= 'RESERVED' then
  return {'NONE'}
end
local count = tonumber(r[4])
buyer_give_back(buyer_key, count)
redis.call('DEL', res_key)
redis.call('SREM', winners_key, order_id)
redis.call('HDEL', KEYS[6], order_id)
if sku[1] then
  local available = redis.call('HINCRBY', sku_key, 'available', count)
  if available > 0 then
    soldout_clear(sku_key, ARGV[4], ARGV[5])
  end
end
return {'RELEASED'}
