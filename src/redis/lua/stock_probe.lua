#!lua
-- stock_probe.lua: one slot's part of the test a dry bucket passes before it
-- is drained (redis/buckets/quiet.rs): what the bucket holds, and in the home
-- slot the pool and its move counter, with the transfers out of the slot not
-- yet settled, all read at one instant of the slot.
--
-- KEYS[1] bucket hash  KEYS[2] its transfers-out hash
-- ARGV[1] expected bucket count
-- Returns {'OK', available, pool, pool_moves, pending} or {'LAYOUT'}. A missing
-- bucket hash holds nothing (as the reclaim reads it); its pending transfers
-- still count.

local f = redis.call('HMGET', KEYS[1], 'available', 'pool', 'pool_moves', 'buckets')
if f[1] and (f[4] or '1') ~= ARGV[1] then
  return {'LAYOUT'}
end
local pending = redis.call('HLEN', KEYS[2])
return {'OK', f[1] or '0', f[2] or '0', f[3] or '0', string.format('%d', pending)}
