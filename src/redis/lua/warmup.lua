#!lua
-- warmup.lua: set a SKU's Redis state from MySQL (warm-up, or a Redis that
-- restarted empty). The caller has checked nothing is in flight, or forced it
-- and accounted for what is.
--
-- KEYS[1] sku hash
-- ARGV[1] available  ARGV[2] total  ARGV[3] limit_per_user  ARGV[4] adjust
-- ARGV[5] sold-out channel  ARGV[6] sku_id

redis.call('HSET', KEYS[1], 'available', ARGV[1], 'total', ARGV[2], 'limit', ARGV[3],
  'adjust', ARGV[4])
if tonumber(ARGV[1]) <= 0 then
  redis.call('HSET', KEYS[1], 'soldout', '1')
  redis.call('PUBLISH', ARGV[5], 'S:' .. ARGV[6])
else
  redis.call('HDEL', KEYS[1], 'soldout')
  redis.call('PUBLISH', ARGV[5], 'A:' .. ARGV[6])
end
return {'OK'}
