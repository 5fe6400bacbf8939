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

-- The buyer's rate limit on this SKU (`limits.per_user_*`; `rps` 0 = off):
-- GCRA, the token bucket kept as one number, the buyer's theoretical arrival
-- time (`t`, given raw: nil when none). Each attempt moves it one emission
-- interval (1000/rps ms) later; an attempt more than `burst - 1` intervals
-- ahead of now is refused. Returns the next `t` when the attempt is allowed
-- (nil when the limit is off), else nil and the wait in ms as text.
local function buyer_rate(tat_text, now_ms, rps, burst)
  if rps <= 0 then
    return nil
  end
  local interval = 1000 / rps
  local tat = math.max(tonumber(tat_text or '0') or 0, now_ms)
  local ahead = tat - now_ms
  local tolerance = (burst - 1) * interval
  if ahead > tolerance then
    return nil, string.format('%.0f', math.ceil(ahead - tolerance))
  end
  return tat + interval
end

-- Records an allowed attempt that holds nothing (a refusal after the rate
-- limit): `t` moves to `next_tat` (nil: the limit is off, nothing written).
-- A hash holding only `t` (`alone`: no `n`, no `x`) expires once `t` lies in
-- the past, so memory is bounded by the active buyers; one that holds more
-- keeps the longer expiry of its units and lapses. Returns `reply`.
local function buyer_note_attempt(reply, buyer_key, next_tat, now_ms, alone)
  if next_tat then
    redis.call('HSET', buyer_key, 't', string.format('%.3f', next_tat))
    if alone then
      redis.call('PEXPIRE', buyer_key, math.ceil(next_tat - now_ms) + 1000)
    end
  end
  return reply
end
