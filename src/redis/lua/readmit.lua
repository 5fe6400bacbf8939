#!lua
-- readmit.lua: settle a request id Redis admitted a second time.
--
-- Redis lost the first record of a reservation MySQL already holds (a failover
-- to a lagging replica, or the record outlived its retention) and admitted a
-- retry of it as new. The consumer finds the deduction is a duplicate whose
-- admission time differs from the ledger row's and calls this script:
-- - the record takes the ledger row's times (so the record and MySQL agree, and
--   a redelivery of the same message finds nothing more to do: idempotent);
-- - if the SKU's `adjust` term holds the unit (a repair already counted the
--   first admission's unit without a record), the second deduction's unit goes
--   back to `available`: the same unit must not be held twice. Otherwise the
--   second admission simply re-did the lost write, and stock is already right.
-- The buyer's counter is left alone: in both cases it counts the one live unit.
--
-- KEYS[1] sku hash  KEYS[2] reservation hash
-- ARGV[1] created_ms of the second admission (the message)  ARGV[2] count
-- ARGV[3] created_ms of the ledger row  ARGV[4] expires_ms of the ledger row
-- ARGV[5] sold-out channel  ARGV[6] event subject (`<sku>` or `<sku>.<bucket>`)
-- Returns {'RETURNED'}, {'RETIMED'} or {'NOOP'} (already settled, or another record).

local rec = redis.call('HMGET', KEYS[2], 'created_ms', 'status')
if rec[1] ~= ARGV[1] then
  return {'NOOP'}
end
redis.call('HSET', KEYS[2], 'created_ms', ARGV[3], 'expires_ms', ARGV[4])
local count = tonumber(ARGV[2])
local adjust = tonumber(redis.call('HGET', KEYS[1], 'adjust') or '0')
if adjust < count or (rec[2] ~= 'RESERVED' and rec[2] ~= 'CONFIRMED') then
  return {'RETIMED'}
end
redis.call('HINCRBY', KEYS[1], 'adjust', -count)
local available = redis.call('HINCRBY', KEYS[1], 'available', count)
if available > 0 then
  soldout_clear(KEYS[1], ARGV[5], ARGV[6])
end
return {'RETURNED'}
