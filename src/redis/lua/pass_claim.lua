#!lua
-- pass_claim.lua: an admission pass buys once (contract, "Passes"). The api
-- claims the pass for the hold it admits just before the admission script:
-- the first hold to claim it keeps it; the same hold again (a retry, a replay
-- of its id) passes; another hold is refused. One key, the buyer's slot.
-- The rule is lib/pass.lua's, shared with reserve.lua, which claims the pass
-- inside the admission where it can (contract §20).
--
-- KEYS[1] the pass's claim (`{u<user>}:pass:<jti>`)
-- ARGV[1] the hold: `r:<sku>:<request_id>` or `o:<order_id>`
-- ARGV[2] the pass's `exp` + the margin, Unix ms: the claim lives until then
--         (by Redis's clock; at least a second)
--
-- Returns {'CLAIMED'} (new), {'SAME'} (this hold's already) or {'USED', holder}.

local state, holder = pass_claim_state(KEYS[1], ARGV[1])
if state ~= 'FREE' then
  return {state, holder}
end
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
pass_keep(KEYS[1], ARGV[1], tonumber(ARGV[2]), now_ms)
return {'CLAIMED'}
