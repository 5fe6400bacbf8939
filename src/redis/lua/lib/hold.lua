-- lib/hold.lua: the admission of one held line, shared by the three scripts
-- that hold stock (reserve.lua: a reservation, a hold of one line; order.lua:
-- a whole order on a standalone Redis; order_hold.lua: one line of an order
-- held line by line). The line's fit, its record and a batch's shared writes
-- of one SKU live only here (docs/architecture.md, "Where each rule lives"),
-- and so does the gate of a SKU's sale terms (the window by Redis's clock,
-- the pass a SKU requires),
-- with what a batch's holds share besides (the clock and times, the text of
-- a hold's command error).
-- What a script does differently on purpose stays in it: the replay checks,
-- DRY of a split bucket that is not drained, CONTENDED of order_hold.lua.
-- Joined after lib/soldout.lua and lib/buyer.lua, whose functions it calls
-- (src/redis/scripts.rs). Values go in and out positionally: no table is
-- built per line here, and numbers given to redis.call arrive as text. (The
-- values a call shares could be set once per call into this file's own
-- locals instead of passed per line; under callgrind that made a call of
-- one reservation dearer by more than it made a line cheaper.)

-- The clock of a batch of holds (Redis TIME: one clock for every api node
-- and every hold of the call) and the times its holds carry: `now_ms`, then
-- as text `created_ms`, `expires_ms` (`ttl_ms` later) and until when a held
-- record and the keys it counts in live (`held_until`, Unix ms: `ttl_ms +
-- retention_ms` later). Text once per call: a Lua number given to
-- redis.call is printf'ed every time (5 % of reserve.lua's instructions
-- under callgrind). The keys' lives are set with PEXPIREAT, not PEXPIRE: a
-- relative PEXPIRE is rewritten into a PEXPIREAT for replicas and the AOF,
-- a new argument made per command (~1.7k instructions a key under
-- callgrind).
local function hold_times(ttl_ms, retention_ms)
  local t = redis.call('TIME')
  local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  return now_ms, string.format('%.0f', now_ms), string.format('%.0f', now_ms + ttl_ms),
    string.format('%.0f', now_ms + ttl_ms + retention_ms)
end

-- The SKU's sale terms against a hold (docs/contract.md §19):
-- `opens`, `closes` (ms text, nil for none) and `pass_needed` ('1' or nil)
-- are the SKU hash's `so`, `sc` and `rp`, read by the HMGET each script makes
-- of the SKU anyway; `carries` is the hold's ARGV flag ('1': it carries a
-- verified pass); `now_ms` is hold_times' (Redis TIME: the one clock that
-- opens a sale for every api node). Returns SALE_NOT_STARTED (with `opens`),
-- SALE_ENDED (from `closes` on), PASS_REQUIRED, or nil when the hold may go
-- on. Judged after the replay and NOT_LOADED, before the line's fit: a
-- refusal here writes nothing and is no attempt of the rate limit. The
-- scripts call it only when the SKU has terms (one `or` of three locals).
local function hold_gate(opens, closes, pass_needed, carries, now_ms)
  if opens and now_ms < tonumber(opens) then
    return 'SALE_NOT_STARTED', opens
  end
  if closes and now_ms >= tonumber(closes) then
    return 'SALE_ENDED'
  end
  if pass_needed == '1' and carries ~= '1' then
    return 'PASS_REQUIRED'
  end
  return nil
end

-- Whether one line of `count` units fits the buyer and the stock, in this
-- order: the buyer's rate limit (off: then `t` is not even read), the lapse
-- cap and the per-buyer `limit` (lib/buyer.lua), then the stock (`left`:
-- the units the SKU still has for this line). One HMGET of the buyer hash.
-- Returns the refusal's words `why, a, b` (nil when the line fits), then
-- `next_tat` (the rate limit's next `t`, nil when off), `alone` (with the
-- limit on: the buyer hash held neither `n` nor `x`) and `bought` (`n` as a
-- number). `why` is RATE_LIMITED (a = the wait in ms; the attempt does not
-- count), LAPSED or LIMIT (lib/buyer.lua's words), SOLD_OUT, or
-- INSUFFICIENT (a = left). Every refusal but RATE_LIMITED is an attempt the
-- script notes (buyer_note_attempt) once it has answered its own words.
local function hold_fit(buyer_key, count, limit, left, now_ms, rps, burst, max_lapsed,
    max_lapsed_text)
  local buyer, next_tat, wait, alone
  if rps > 0 then
    buyer = redis.call('HMGET', buyer_key, 'n', 'x', 't')
    next_tat, wait = buyer_rate(buyer[3], now_ms, rps, burst)
    if wait then
      return 'RATE_LIMITED', wait
    end
    alone = not buyer[1] and not buyer[2]
  else
    buyer = redis.call('HMGET', buyer_key, 'n', 'x')
  end
  local bought = tonumber(buyer[1] or '0')
  local why, said, bound = buyer_refusal(bought, buyer[2], count, limit, max_lapsed,
    max_lapsed_text)
  if why then
    return why, said, bound, next_tat, alone
  end
  if left < count then
    if left <= 0 then
      return 'SOLD_OUT', nil, nil, next_tat, alone
    end
    return 'INSUFFICIENT', string.format('%.0f', left), nil, next_tat, alone
  end
  return nil, nil, nil, next_tat, alone, bought
end

-- The record of a held line, `res:<id>`: the one place its fields are named.
-- `user`, `count`, `status` RESERVED, `created_ms`, `expires_ms` (text),
-- then `order` (the order id, a line of an order: nil for a single
-- reservation), `attempt` (the attempt of an order held line by line: nil
-- otherwise) and `client` (the requester's name: nil when ownership is not
-- enforced). It lives until `held_until` (Unix ms text). Readers: reserve.lua's and
-- order_hold.lua's replay, finish.lua, rebuild.lua, redis/inspect.rs.
local function hold_record(res_key, held_until, user_id, count, created, expires, order_id, attempt,
    client)
  if not order_id then
    if client then
      redis.call('HSET', res_key, 'user', user_id, 'count', count, 'status', 'RESERVED',
        'created_ms', created, 'expires_ms', expires, 'client', client)
    else
      redis.call('HSET', res_key, 'user', user_id, 'count', count, 'status', 'RESERVED',
        'created_ms', created, 'expires_ms', expires)
    end
  elseif not attempt then
    if client then
      redis.call('HSET', res_key, 'user', user_id, 'count', count, 'status', 'RESERVED',
        'created_ms', created, 'expires_ms', expires, 'order', order_id,
        'client', client)
    else
      redis.call('HSET', res_key, 'user', user_id, 'count', count, 'status', 'RESERVED',
        'created_ms', created, 'expires_ms', expires, 'order', order_id)
    end
  elseif client then
    redis.call('HSET', res_key, 'user', user_id, 'count', count, 'status', 'RESERVED',
      'created_ms', created, 'expires_ms', expires, 'order', order_id,
      'attempt', attempt, 'client', client)
  else
    redis.call('HSET', res_key, 'user', user_id, 'count', count, 'status', 'RESERVED',
      'created_ms', created, 'expires_ms', expires, 'order', order_id,
      'attempt', attempt)
  end
  redis.call('PEXPIREAT', res_key, held_until)
end

-- The writes a batch of holds shares on one SKU (bucket), made once after
-- its last hold: `taken` units off `available`, the ids that took them
-- (`winners`, a list) into the winners set (which lives until `held_until`,
-- Unix ms text),
-- and, when the stock is gone and the SKU `drained` (a split bucket whose
-- pool has not answered empty is not), the sold-out marker raised and told
-- on `channel` as `subject` (told even when it was up). Nothing when
-- `taken` is 0.
local function hold_batch_writes(sku_key, winners_key, taken, winners, held_until, drained, channel,
    subject)
  if taken > 0 then
    local left = redis.call('HINCRBY', sku_key, 'available', -taken)
    redis.call('SADD', winners_key, unpack(winners))
    redis.call('PEXPIREAT', winners_key, held_until)
    if left <= 0 and drained then
      soldout_set(sku_key)
      soldout_tell(channel, subject, true)
    end
  end
end

-- A command error that failed one hold of a batch (a key of the wrong type,
-- memory exhausted mid-way), as the text of its {'ERROR', text} reply.
local function hold_error_text(err)
  if type(err) == 'table' then
    return tostring(err.err or err[1] or 'error')
  end
  return tostring(err)
end
