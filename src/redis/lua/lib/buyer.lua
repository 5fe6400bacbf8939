-- lib/buyer.lua: the buyer's rules in Redis, decided and undone only here
-- (docs/architecture.md, "Where each rule lives"). A buyer hash holds `n`
-- (live units of this SKU), `t` (the rate limit's next time) and `x` (holds
-- that lapsed unpaid). Joined ahead of each script that uses it
-- (src/redis/scripts.rs).

-- Whether the buyer may hold `count` more units: nil when yes, else the
-- refusal's words. `bought` is `n` as a number, `lapsed` the raw `x` (nil
-- when none), `max_lapsed` `limits.max_lapsed_holds` (0 = off) and
-- `max_lapsed_text` the same as given. The lapse cap (OWASP OAT-021) comes
-- before the per-buyer limit, as in MySQL's fit (src/domain/admission.rs).
local function buyer_refusal(bought, lapsed, count, limit, max_lapsed, max_lapsed_text)
  if max_lapsed > 0 and lapsed and tonumber(lapsed) >= max_lapsed then
    return 'LAPSED', lapsed, max_lapsed_text
  end
  if bought + count > limit then
    return 'LIMIT', string.format('%.0f', bought), string.format('%.0f', limit)
  end
  return nil
end

-- Gives `count` units back to the buyer's quota: `n` goes with its last
-- unit (the rate limit's `t` and the lapses' `x` stay; the hash goes when its
-- last field does). A buyer hash without `n` is left alone.
local function buyer_give_back(buyer_key, count)
  local held = tonumber(redis.call('HGET', buyer_key, 'n'))
  if held then
    if held - count <= 0 then
      redis.call('HDEL', buyer_key, 'n')
    else
      redis.call('HINCRBY', buyer_key, 'n', -count)
    end
  end
end
