#!lua
-- load_sku.lua: create or restock a SKU in Redis without clobbering live reservations.
--
-- KEYS[1] sku hash  KEYS[2] this operation's marker (`<p>{sku}:op:<op_id>`)
-- ARGV[1] delta of available (signed) when the SKU is already loaded
-- ARGV[2] available to set when the SKU is not loaded (MySQL's available_stock)
-- ARGV[3] limit_per_user  ARGV[4] total_stock
-- ARGV[5] sold-out Pub/Sub channel  ARGV[6] sku_id  ARGV[7] marker ttl ms
-- ARGV[8] bucket count  ARGV[9] tags of buckets 1.. (comma separated)
--
-- Returns {'OK', available} or {'BELOW_RESERVED', available} when a negative delta
-- would take Redis below zero (units already promised to buyers), or
-- {'LAYOUT', buckets} when the SKU is loaded with another bucket count
-- (ops/sku_admin.rs re-splits first).
--
-- A split SKU (ARGV[8] > 1) keeps the stock not yet leased to a bucket in
-- `pool`: a new one starts with everything there (bucket 0's `available` 0),
-- and a restock moves the pool. The caller gathers the buckets' stock into
-- the pool before a cut; a cut deeper than the pool is BELOW_RESERVED.
--
-- A Redis Cluster client re-sends a script whose connection dropped, so this one
-- may run twice. The marker makes the second run answer the first one's result
-- instead of applying the delta again.

local sku_key = KEYS[1]
local applied = redis.call('GET', KEYS[2])
if applied then
  return {'OK', applied}
end
local delta = tonumber(ARGV[1])
local buckets = ARGV[8] or '1'
local loaded = redis.call('HMGET', sku_key, 'available', 'buckets', 'pool')
if loaded[1] and (loaded[2] or '1') ~= buckets then
  return {'LAYOUT', loaded[2] or '1'}
end
if buckets ~= '1' then
  local pool
  if loaded[1] then
    pool = tonumber(loaded[3] or '0') + delta
    if pool < 0 then
      return {'BELOW_RESERVED', loaded[3] or '0'}
    end
  else
    pool = tonumber(ARGV[2])
    redis.call('HSET', sku_key, 'available', '0', 'buckets', buckets, 'tags', ARGV[9])
  end
  redis.call('HSET', sku_key, 'pool', string.format('%.0f', pool), 'limit', ARGV[3],
    'total', ARGV[4])
  redis.call('SET', KEYS[2], string.format('%.0f', pool), 'PX', ARGV[7])
  return {'OK', string.format('%.0f', pool)}
end
local current = loaded[1]
local available
if current then
  available = tonumber(current) + delta
  if available < 0 then
    return {'BELOW_RESERVED', current}
  end
else
  available = tonumber(ARGV[2])
end
redis.call('HSET', sku_key, 'available', string.format('%.0f', available), 'limit', ARGV[3],
  'total', ARGV[4])
if available > 0 then
  if redis.call('HDEL', sku_key, 'soldout') == 1 then
    redis.call('PUBLISH', ARGV[5], 'A:' .. ARGV[6])
  end
elseif redis.call('HSET', sku_key, 'soldout', '1') == 1 then
  redis.call('PUBLISH', ARGV[5], 'S:' .. ARGV[6])
end
redis.call('SET', KEYS[2], string.format('%.0f', available), 'PX', ARGV[7])
return {'OK', string.format('%.0f', available)}
