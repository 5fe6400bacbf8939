#!lua
-- warmup.lua: set a SKU's Redis state from MySQL (warm-up, or a Redis that
-- restarted empty). The caller has checked nothing is in flight, or forced it
-- and accounted for what is.
--
-- KEYS[1] sku hash  KEYS[2] its transfers-out hash (split SKUs)
-- KEYS[3] its unsettled cuts (load_sku.lua)
-- ARGV[1] available  ARGV[2] total  ARGV[3] limit_per_user  ARGV[4] adjust
-- ARGV[5] sold-out channel  ARGV[6] sku_id  ARGV[7] bucket count
-- ARGV[8] tags of buckets 1..  ARGV[9] `mv`: the last movement of stock
-- ARGV[1] counts, so a restock's Redis step still to come for it (or one
-- before it) moves nothing (load_sku.lua answers INCLUDED)
--
-- A split SKU (ARGV[7] > 1) gets everything into its pool: bucket 0 and (by
-- bucket_init.lua 'reset') every other bucket start empty and lease again.
-- Pending transfers are dropped: the stock they carried is in ARGV[1].
--
-- A movement of stock that reached Redis after ARGV[1] was read (`mt` above
-- ARGV[9]), or a cut taken and not yet settled, would be lost under the
-- overwrite: {'MOVED'}, nothing written (the caller reads MySQL again).

if redis.call('HLEN', KEYS[3]) > 0 or
    tonumber(redis.call('HGET', KEYS[1], 'mt') or '0') > tonumber(ARGV[9]) then
  return {'MOVED'}
end

if (ARGV[7] or '1') ~= '1' then
  redis.call('DEL', KEYS[2])
  redis.call('HSET', KEYS[1], 'available', '0', 'pool', ARGV[1], 'total', ARGV[2],
    'limit', ARGV[3], 'adjust', ARGV[4], 'buckets', ARGV[7], 'tags', ARGV[8], 'mv', ARGV[9], 'mt', ARGV[9])
  local undrained = redis.call('HDEL', KEYS[1], 'drained') == 1
  if soldout_unset(KEYS[1]) or undrained then
    soldout_tell(ARGV[5], ARGV[6] .. '.0', false)
  end
  return {'OK'}
end
redis.call('HSET', KEYS[1], 'available', ARGV[1], 'total', ARGV[2], 'limit', ARGV[3],
  'adjust', ARGV[4], 'mv', ARGV[9], 'mt', ARGV[9])
redis.call('HDEL', KEYS[1], 'buckets', 'tags', 'pool', 'drained')
-- told whether or not the marker moved: a warm-up re-tells every api node
if tonumber(ARGV[1]) <= 0 then
  soldout_set(KEYS[1])
  soldout_tell(ARGV[5], ARGV[6], true)
else
  soldout_unset(KEYS[1])
  soldout_tell(ARGV[5], ARGV[6], false)
end
return {'OK'}
