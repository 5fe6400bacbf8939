-- lib/pass.lua: a pass buys once (docs/contract.md §20). A pass's claim is one
-- key (`{u<user>}:pass:<jti>`) whose value names the hold that has it
-- (`r:<sku>:<request_id>` or `o:<order_id>`). The rule, for the two places
-- that claim: pass_claim.lua (its own call, on a Redis Cluster or beside the
-- hold budget) and reserve.lua (inside the admission, on a standalone Redis).

-- Who has the pass, seen by `holder`: 'FREE', 'SAME' (already this hold's:
-- a retry or a replay of its id) or 'USED' and the hold that has it.
local function pass_claim_state(claim_key, holder)
  local had = redis.call('GET', claim_key)
  if not had then
    return 'FREE'
  end
  if had == holder then
    return 'SAME'
  end
  return 'USED', had
end

-- Records the pass as `holder`'s until `keep_until_ms` (Unix ms by Redis's
-- clock, `now_ms`): the pass's `exp` plus a margin, at least a second.
local function pass_keep(claim_key, holder, keep_until_ms, now_ms)
  local keep_ms = math.max(keep_until_ms - now_ms, 1000)
  redis.call('SET', claim_key, holder, 'PX', string.format('%.0f', keep_ms))
end
