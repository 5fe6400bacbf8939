#!lua
-- transfer_credit.lua: second step of a stock transfer (see transfer_debit.lua):
-- adds the units to the destination exactly once per transfer id. A re-sent or
-- recovered credit finds the id in `xin` and changes nothing.
--
-- KEYS[1] destination hash  KEYS[2] destination xin set
-- ARGV[1] field credited (`pool` or `available`)  ARGV[2] transfer id
-- ARGV[3] units  ARGV[4] how long `xin` remembers ids (ms)
-- ARGV[5] sold-out channel  ARGV[6] the destination's event subject
-- Returns {'APPLIED', value} or {'ALREADY'} or {'MISSING'} (no destination hash:
-- nothing written; the transfer stays pending for the reconciler).

if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'MISSING'}
end
if redis.call('SADD', KEYS[2], ARGV[2]) == 0 then
  return {'ALREADY'}
end
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[4]))
local value = redis.call('HINCRBY', KEYS[1], ARGV[1], tonumber(ARGV[3]))
if ARGV[1] == 'pool' then
  -- counted as the debit counts it (transfer_debit.lua, buckets/quiet.rs)
  redis.call('HINCRBY', KEYS[1], 'pool_moves', 1)
end
if ARGV[1] == 'available' and value > 0 then
  soldout_clear(KEYS[1], ARGV[5], ARGV[6])
end
return {'APPLIED', string.format('%.0f', value)}
