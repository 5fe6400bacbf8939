#!lua
-- cut_settle.lua: settle a cut Redis took before its MySQL commit
-- (src/ops/stock_step.rs): keep it (the movement committed) or give its units
-- back (it never will). Once per cut: the entry is removed as it is settled.
--
-- KEYS[1] sku hash  KEYS[2] the SKU's unsettled cuts (`<p>{sku}:cuts`)
-- ARGV[1] step id  ARGV[2] 'keep' or 'give'  ARGV[3] sold-out channel  ARGV[4] sku_id
-- ARGV[5] the committed movement's id (keep): raises `mt` as load_sku.lua does
--
-- Returns {'SETTLED'} (nothing to do), {'KEPT'}, {'GONE'} (Redis lost the SKU:
-- warm-up copies MySQL, which never had the cut) or {'GIVEN', available}
-- (the pool's, for a split SKU: the caller primes its buckets again).

local entry = redis.call('HGET', KEYS[2], ARGV[1])
if not entry then
  return {'SETTLED'}
end
redis.call('HDEL', KEYS[2], ARGV[1])
if ARGV[2] == 'keep' then
  local id = tonumber(ARGV[5] or '0')
  if redis.call('EXISTS', KEYS[1]) == 1 and id > tonumber(redis.call('HGET', KEYS[1], 'mt') or '0') then
    redis.call('HSET', KEYS[1], 'mt', ARGV[5])
  end
  return {'KEPT'}
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'GONE'}
end
local units = tonumber(string.match(entry, '^(%d+):'))
redis.call('HINCRBY', KEYS[1], 'total', units)
if (redis.call('HGET', KEYS[1], 'buckets') or '1') ~= '1' then
  return {'GIVEN', tostring(redis.call('HINCRBY', KEYS[1], 'pool', units))}
end
local available = redis.call('HINCRBY', KEYS[1], 'available', units)
if available > 0 then
  soldout_clear(KEYS[1], ARGV[3], ARGV[4])
end
return {'GIVEN', tostring(available)}
