#!lua
-- drain.lua: set or clear a bucket's `drained` flag (split SKUs, redis/buckets).
--
-- Drained: the pool answered empty and no sibling had stock to give, so the
-- bucket's buyers are refused once it is empty (SOLD_OUT), with the sold-out
-- flag raised and broadcast when nothing is left. Cleared when stock comes
-- back to the pool (restock, reclaim): the bucket's next buyer leases again.
--
-- KEYS[1] bucket hash
-- ARGV[1] '1' to drain, '0' to clear  ARGV[2] expected bucket count
-- ARGV[3] sold-out channel  ARGV[4] the bucket's event subject
-- Returns {'OK', available} or {'LAYOUT'}.

local fields = redis.call('HMGET', KEYS[1], 'available', 'buckets')
if not fields[1] or (fields[2] or '1') ~= ARGV[2] then
  return {'LAYOUT'}
end
local available = tonumber(fields[1])
if ARGV[1] == '1' then
  redis.call('HSET', KEYS[1], 'drained', '1')
  if available <= 0 then
    soldout_raise(KEYS[1], ARGV[3], ARGV[4])
  end
elseif redis.call('HDEL', KEYS[1], 'drained') == 1 then
  soldout_clear(KEYS[1], ARGV[3], ARGV[4])
end
return {'OK', fields[1]}
