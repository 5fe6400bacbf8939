#!lua
-- pass_claim.lua: an admission pass buys once (contract, "Passes"). The api
-- claims the pass for the hold it admits just before the admission script:
-- the first hold to claim it keeps it; the same hold again (a retry, a replay
-- of its id) passes; another hold is refused. One key, the buyer's slot.
--
-- KEYS[1] the pass's claim (`{u<user>}:pass:<jti>`)
-- ARGV[1] the hold: `r:<sku>:<request_id>` or `o:<order_id>`
-- ARGV[2] the pass's `exp` + the margin, Unix ms: the claim lives until then
--         (by Redis's clock; at least a second)
--
-- Returns {'CLAIMED'} (new), {'SAME'} (this hold's already) or {'USED', holder}.

local holder = redis.call('GET', KEYS[1])
if holder then
  if holder == ARGV[1] then
    return {'SAME'}
  end
  return {'USED', holder}
end
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local keep_ms = math.max(tonumber(ARGV[2]) - now_ms, 1000)
redis.call('SET', KEYS[1], ARGV[1], 'PX', keep_ms)
return {'CLAIMED'}
