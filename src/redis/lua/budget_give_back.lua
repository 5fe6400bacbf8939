#!lua
-- budget_give_back.lua: lines of holds that ended (confirmed, released,
-- rejected) or were never held (the admission refused) give their units
-- back to the buyer's hold budget (budget_claim.lua). By field, so giving
-- back twice, or a line that never claimed, is a no-op. The hash goes with
-- its last claim.
--
-- KEYS[1] the buyer's budget hash
-- ARGV the fields `<sku>:<hold_id>` to give back
--
-- Returns the units given back (as a string).

local key = KEYS[1]
local back = 0
for i = 1, #ARGV do
  local claim = redis.call('HGET', key, ARGV[i])
  if claim then
    redis.call('HDEL', key, ARGV[i])
    back = back + tonumber(string.match(claim, '^(%d+)') or '0')
  end
end
if back > 0 then
  local live = tonumber(redis.call('HGET', key, 't') or '0') - back
  if live <= 0 and redis.call('HLEN', key) <= 1 then
    redis.call('DEL', key)
  else
    redis.call('HSET', key, 't', math.max(live, 0))
  end
end
return string.format('%.0f', back)
