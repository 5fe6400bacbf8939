#!lua
-- adjust.lua: the reconciler's repair, as a compare-and-set. Brings `available`
-- to the truth only if it still holds the value the check saw, so a repair can
-- never race a reservation into a wrong number.
--
-- KEYS[1] sku hash
-- ARGV[1] expected available  ARGV[2] delta  ARGV[3] sold-out channel  ARGV[4] sku_id
-- ARGV[5] new `adjust` value  ARGV[6] field repaired: `available`, or `pool`
--         for a split SKU (redis/buckets), whose buckets keep their leases
--
-- `adjust` is the part of `total - available` no reservation record explains
-- (records lost in a failover, then repaired). The caller re-baselines it so
-- Redis' internal conservation holds after the repair:
--   total - available == units of live or rejected winning records + adjust
-- Returns {'OK', available} or {'CHANGED', available}; a pool that would go
-- below zero is left alone and answers CHANGED too.

local field = ARGV[6] or 'available'
local current = redis.call('HGET', KEYS[1], field)
if field == 'pool' and not current and redis.call('EXISTS', KEYS[1]) == 1 then
  current = '0'
end
if not current or current ~= ARGV[1] then
  return {'CHANGED', current or ''}
end
local delta = tonumber(ARGV[2])
if field == 'pool' then
  if tonumber(current) + delta < 0 then
    return {'CHANGED', current}
  end
  local pool = redis.call('HINCRBY', KEYS[1], 'pool', delta)
  redis.call('HSET', KEYS[1], 'adjust', ARGV[5])
  return {'OK', tostring(pool)}
end
local available = redis.call('HINCRBY', KEYS[1], 'available', delta)
redis.call('HSET', KEYS[1], 'adjust', ARGV[5])
soldout_follow(KEYS[1], available, ARGV[3], ARGV[4])
return {'OK', tostring(available)}
