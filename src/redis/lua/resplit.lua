#!lua
-- resplit.lua: give a SKU's home hash a new bucket count (redis/buckets),
-- atomically moving its stock to where the new layout keeps it. The caller
-- has checked no buyer state of the SKU lives, and emptied the old buckets
-- 1.. into the pool (each drained first, so none leased again).
--
-- KEYS[1] home hash
-- ARGV[1] new bucket count  ARGV[2] tags of buckets 1..  ARGV[3] sold-out channel
-- ARGV[4] sku_id
-- Split: everything goes to `pool`, bucket 0 starts empty and not drained.
-- One bucket: everything goes to `available`, the split fields go.
-- Returns {'OK', units}.

local f = redis.call('HMGET', KEYS[1], 'available', 'pool')
local units = tonumber(f[1] or '0') + tonumber(f[2] or '0')
local text = string.format('%.0f', units)
if ARGV[1] ~= '1' then
  redis.call('HSET', KEYS[1], 'available', '0', 'pool', text, 'buckets', ARGV[1], 'tags', ARGV[2])
  redis.call('HDEL', KEYS[1], 'drained')
  soldout_unset(KEYS[1])
else
  redis.call('HSET', KEYS[1], 'available', text)
  redis.call('HDEL', KEYS[1], 'pool', 'buckets', 'tags', 'drained')
  if units > 0 then
    soldout_unset(KEYS[1])
  else
    soldout_set(KEYS[1])
  end
end
soldout_tell(ARGV[3], ARGV[4], false)
return {'OK', text}
