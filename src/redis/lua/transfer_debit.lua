#!lua
-- transfer_debit.lua: first step of moving stock between two slots of a split
-- SKU (a lease pool -> bucket, or a give bucket -> pool). Takes the units from
-- the source and records the transfer as pending in the source's `xout` hash;
-- transfer_credit.lua then adds them to the destination (once, by id) and the
-- caller settles (HDEL xout id). A transfer left pending by a crash is finished
-- by the reconciler (ops/rebalance.rs), so no unit is lost or counted twice.
--
-- KEYS[1] source hash  KEYS[2] source xout hash
-- ARGV[1] field taken from (`pool` or `available`)  ARGV[2] expected bucket count
-- ARGV[3] fewest units worth taking (the request's count)  ARGV[4] most units
-- ARGV[5] share divisor: take `floor(value / divisor)` when that is between
--         ARGV[3] and ARGV[4]; chunks shrink as the source empties
-- ARGV[6] transfer id  ARGV[7] destination bucket
-- ARGV[8] sold-out channel  ARGV[9] the source's event subject
-- Returns {'OK', units} or {'EMPTY', value} (nothing taken) or {'LAYOUT'}.

local fields = redis.call('HMGET', KEYS[1], ARGV[1], 'buckets', 'drained')
if (fields[2] or '1') ~= ARGV[2] then
  return {'LAYOUT'}
end
local value = tonumber(fields[1] or '0')
local want = math.max(tonumber(ARGV[3]), math.min(tonumber(ARGV[4]),
  math.floor(value / tonumber(ARGV[5]))))
local units = math.min(value, want)
if units <= 0 then
  return {'EMPTY', string.format('%.0f', value)}
end
local left = redis.call('HINCRBY', KEYS[1], ARGV[1], -units)
if ARGV[1] == 'pool' then
  -- every move of the pool counted: a drain's double read (buckets/quiet.rs)
  -- tells "nothing moved" from "moved and came back to the same value"
  redis.call('HINCRBY', KEYS[1], 'pool_moves', 1)
end
local t = redis.call('TIME')
redis.call('HSET', KEYS[2], ARGV[6], ARGV[7] .. ':' .. units .. ':' .. t[1])
-- a drained bucket that gives its last unit away is sold out
if ARGV[1] == 'available' and left <= 0 and fields[3] == '1' then
  soldout_raise(KEYS[1], ARGV[8], ARGV[9])
end
return {'OK', string.format('%.0f', units)}
