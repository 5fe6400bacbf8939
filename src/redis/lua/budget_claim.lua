#!lua
-- budget_claim.lua: a hold's claim on its buyer's hold budget
-- (`limits.buyer_max_live_units`, contract §12): at most that many live
-- units per buyer across every SKU and both URL families. One key, the
-- buyer's budget hash under the buyer's own hash tag (`{u<user_id>}`), so
-- on a Redis Cluster the claim is a call of its own in the buyer's slot,
-- made before the admission script holds the lines (src/redis/budget.rs).
--
-- The hash: `t` the buyer's live units claimed; one field per held line,
-- `<sku>:<hold_id>` -> `units:deadline_ms`. A line claimed already (a retry
-- of the same request id / order id) is not claimed again, so a retry never
-- counts twice. The deadline is when a claim whose give-back never came
-- (a crash between the claim and the admission, or between the admission's
-- refusal and the give-back) may be dropped: past the longest a hold can
-- live (time to pay and every extension) plus a margin. Such stale claims
-- are dropped only when they would refuse the buyer, so the common claim
-- reads no more than the lines it claims.
--
-- KEYS[1] the buyer's budget hash
-- ARGV[1] the budget in units; 0: restore (never refuses; the rebuild from
--         MySQL, src/ops/rebuild.rs)
-- ARGV[2] a claim's life in ms (its deadline is Redis' TIME plus it)
-- then per line i: ARGV[1+2i] the field `<sku>:<hold_id>`  ARGV[2+2i] units
--
-- Returns {'CLAIMED', live, field...} with the fields this call claimed
-- (none when every line was claimed already), or {'OVER', live, budget}
-- with nothing written.

local key = KEYS[1]
local budget = tonumber(ARGV[1])
local life_ms = tonumber(ARGV[2])
local live = tonumber(redis.call('HGET', key, 't') or '0')

local fresh, adding = {}, 0
for i = 3, #ARGV, 2 do
  if redis.call('HEXISTS', key, ARGV[i]) == 0 then
    fresh[#fresh + 1] = i
    adding = adding + tonumber(ARGV[i + 1])
  end
end
if #fresh == 0 then
  return {'CLAIMED', string.format('%.0f', live)}
end

local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

if budget > 0 and live + adding > budget then
  -- Over: drop the claims whose deadline passed (their hold has ended, its
  -- give-back lost), then judge again.
  local all = redis.call('HGETALL', key)
  for j = 1, #all, 2 do
    local field = all[j]
    if field ~= 't' then
      local units, deadline = string.match(all[j + 1], '^(%d+):(%d+)$')
      if units and tonumber(deadline) < now_ms then
        redis.call('HDEL', key, field)
        live = live - tonumber(units)
      end
    end
  end
  if live < 0 then
    live = 0
  end
  redis.call('HSET', key, 't', live)
  if live + adding > budget then
    return {'OVER', string.format('%.0f', live), ARGV[1]}
  end
end

local deadline = string.format('%.0f', now_ms + life_ms)
local claimed = {'CLAIMED', 0}
for _, i in ipairs(fresh) do
  redis.call('HSET', key, ARGV[i], ARGV[i + 1] .. ':' .. deadline)
  claimed[#claimed + 1] = ARGV[i]
end
live = live + adding
redis.call('HSET', key, 't', live)
claimed[2] = string.format('%.0f', live)
-- The hash outlives its newest claim (every claim lives as long, so the
-- newest one's deadline is the furthest); it goes with its last give-back.
redis.call('PEXPIRE', key, life_ms)
return claimed
