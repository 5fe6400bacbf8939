#!lua
-- order_settle.lua: one line of a committed order, on its slot (the buyer's
-- bucket of a split SKU), after the commit: its hold is a sale now, so its
-- note in the pending hash goes (order_hold.lua), and the sold-out marker
-- the hold left alone is raised if the bucket is still empty — with its
-- broadcast, as reserve.lua raises it — so every api node short-circuits
-- the SKU again. Run off the response path; a settle that never runs costs
-- only time: the note is ignored past the attempt's deadline, and the next
-- reservation that empties the bucket raises the marker.
--
-- KEYS[1] sku (bucket) hash  KEYS[2] pending hash
-- ARGV[1] order_id  ARGV[2] sold-out channel  ARGV[3] event subject
--
-- Returns 1 when it raised the marker, 0 otherwise.
redis.call('HDEL', KEYS[2], ARGV[1])
local sku = redis.call('HMGET', KEYS[1], 'available', 'buckets', 'drained', 'soldout')
if not sku[1] or tonumber(sku[1]) > 0 or sku[4] then
  return 0
end
if (sku[2] or '1') ~= '1' and sku[3] ~= '1' then
  return 0
end
soldout_raise(KEYS[1], ARGV[2], ARGV[3])
return 1
