#!lua
-- order_mark.lua: mirror an order's final state, decided in MySQL, onto its
-- Redis record (`<p>{oi:<n>}:order:<order_id>`), so a replay answers it. The
-- lines are mirrored one by one by finish.lua; this is the order's own
-- status. A record that is gone stays gone (no key without its TTL).
--
-- KEYS[1] order record  ARGV[1] final status
-- Returns 1 when the record changed, 0 otherwise.
local status = redis.call('HGET', KEYS[1], 'status')
if status == false or status == ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'status', ARGV[1])
return 1
