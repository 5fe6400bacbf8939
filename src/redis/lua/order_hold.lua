#!lua
-- order_hold.lua: step 2 of an order held line by line: one line, on its
-- SKU's slot (the buyer's bucket of a split SKU), held as a single
-- reservation whose request id is the order id would be (the record, the
-- buyer's live units, the stock, the winners set), tagged with the order id
-- and the attempt, and with no outbox entry: the order's one entry is
-- written by the commit (order_commit.lua). The line's fit (rate limit,
-- buyer's rules, stock) and its record are lib/hold.lua's, as for a
-- reservation and a line of order.lua; the replay (HELD), the tombstone and
-- deadline, DRY and CONTENDED are this script's.
--
-- A hold is not yet a sale: its attempt may still fail on a later line and
-- give the units back (docs/architecture.md, "Orders", an attempt bound to
-- fail). So it leaves the sold-out marker alone (the saga marks a line that
-- took the last units once the order is committed: order_settle.lua), and
-- it notes its units in the bucket's pending hash (`opend`: order id ->
-- `count:deadline_ms`) until the commit settles the line or the undo
-- releases it. A line that finds too few units while other attempts' notes
-- cover the shortfall answers CONTENDED (the api: 503, retry) instead of a
-- refusal that may be untrue a few milliseconds later. A note outlives no
-- deadline: past it the attempt is committed or undone.
--
-- Anti-suspension: a hold that arrives after its attempt was undone must not
-- hold. Two checks refuse it: the attempt's deadline (ARGV[9], written by
-- order_intent.lua) by this node's clock — past it the commit refuses too
-- (LATE), so no hold of the attempt can be of use — and, before it, the
-- tombstone `otomb:<order>` (the highest attempt undone) that the undo
-- (order_release.lua) writes on the slot of every line whose hold was sent.
-- The deadline bounds how long a tombstone must live: until the deadline,
-- by this clock, plus a margin.
--
-- KEYS[1] sku (bucket) hash  KEYS[2] reservation hash  KEYS[3] buyer hash
-- KEYS[4] winners set  KEYS[5] tombstone  KEYS[6] pending hash
-- ARGV[1] order_id  ARGV[2] user_id  ARGV[3] count  ARGV[4] attempt
-- ARGV[5] created_ms  ARGV[6] expires_ms (the intent's, shared by every line)
-- ARGV[7] record lifetime ms
-- ARGV[8] the bucket count the caller routed with
-- ARGV[9] the attempt's deadline ms (Redis time)
-- ARGV[10] lapsed holds that refuse the buyer (`limits.max_lapsed_holds`, the
--          buyer hash's `x` that finish.lua counts, as in reserve.lua; 0 = off)
-- ARGV[11] the requester, as in reserve.lua ('' ownership not enforced,
--          'c<name>' a client, 'a<name>' an operator): the line records the
--          name as a line of order.lua does (reserve.lua's replay HMGET reads
--          it, so another client's single reservation of this id is TAKEN),
--          and a client finding another client's record of the id is TAKEN
-- ARGV[12] buyer attempts per second on the SKU (`limits.per_user_rps`, 0 =
--          no rate limit)  ARGV[13] buyer burst: the line is an attempt of
--          the buyer on its SKU, as a reservation is (lib/buyer.lua); a re-sent
--          call of the same attempt (HELD) is not one
-- ARGV[14] '1' when the order carries a verified pass, else '0': the SKU
--          hash's sale terms (`so`, `sc`, `rp`) are judged by lib/hold.lua's
--          hold_gate after NOT_LOADED (SALE_NOT_STARTED with the opening,
--          SALE_ENDED, PASS_REQUIRED; nothing written)
--
-- Returns {'OK', available_after}, {'HELD', available} (this attempt held
-- it already: a re-sent call), {'ABORTED'} (the attempt was undone, or
-- its deadline passed),
-- {'MISMATCH'} (a record of this id that is not this attempt's),
-- {'TAKEN'} (another client's record of this id: nothing of it told),
-- {'NOT_LOADED'}, {'SALE_NOT_STARTED', opens_ms}, {'SALE_ENDED'}, {'PASS_REQUIRED'},
-- {'RATE_LIMITED', wait_ms} (nothing written), {'LAPSED', lapsed, cap}, {'LIMIT', bought, limit},
-- {'DRY', left} (a split bucket that is not drained: lease first),
-- {'SOLD_OUT'}, {'INSUFFICIENT', left}, {'CONTENDED', left, pending},
-- {'LAYOUT', buckets}.

local sku_key, res_key, buyer_key, winners_key, tomb_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local pending_key = KEYS[6]
local order_id, user_id, count_arg, attempt = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local count = tonumber(count_arg)

local sku = redis.call('HMGET', sku_key, 'available', 'limit', 'buckets', 'drained', 'so', 'sc',
  'rp')
local buckets = sku[3] or '1'
if sku[1] and buckets ~= ARGV[8] then
  return {'LAYOUT', buckets}
end
if tonumber(redis.call('GET', tomb_key) or '0') >= tonumber(attempt) then
  return {'ABORTED'}
end
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deadline_ms = tonumber(ARGV[9])
if now_ms > deadline_ms then
  return {'ABORTED'}
end
local requester = ARGV[11] or ''
local client = string.sub(requester, 2)
local prior = redis.call('HMGET', res_key, 'user', 'order', 'attempt', 'client')
if prior[1] then
  if prior[2] == order_id and prior[3] == attempt then
    return {'HELD', string.format('%.0f', tonumber(sku[1] or '0'))}
  end
  if string.sub(requester, 1, 1) == 'c' and prior[4] and prior[4] ~= client then
    return {'TAKEN'}
  end
  return {'MISMATCH'}
end
if not (sku[1] and sku[2]) then
  return {'NOT_LOADED'}
end
if sku[5] or sku[6] or sku[7] then
  local gate, opens = hold_gate(sku[5], sku[6], sku[7], ARGV[14], now_ms)
  if gate then
    return {gate, opens}
  end
end
local drained = buckets == '1' or sku[4] == '1'
local available, limit = tonumber(sku[1]), tonumber(sku[2])
-- The line's fit (lib/hold.lua): the buyer's rate limit, lapses and limit,
-- then the stock; a refusal after the rate check still records the attempt.
local why, said, bound, next_tat, alone, bought = hold_fit(buyer_key, count, limit, available,
  now_ms, tonumber(ARGV[12] or '0'), tonumber(ARGV[13]), tonumber(ARGV[10] or '0'), ARGV[10])
if why == 'RATE_LIMITED' then
  return {why, said}
end
local function refuse(reply)
  return buyer_note_attempt(reply, buyer_key, next_tat, now_ms, alone)
end
if why and why ~= 'SOLD_OUT' and why ~= 'INSUFFICIENT' then
  return refuse({why, said, bound})
end
-- The units other attempts hold here and may still give back: the notes
-- of other orders whose deadline has not passed (those past it are dropped).
local function pending_elsewhere()
  local notes = redis.call('HGETALL', pending_key)
  local units = 0
  for i = 1, #notes, 2 do
    local n, until_ms = string.match(notes[i + 1], '^(%d+):(%d+)$')
    if notes[i] ~= order_id and n and tonumber(until_ms) >= now_ms then
      units = units + tonumber(n)
    elseif notes[i] ~= order_id then
      redis.call('HDEL', pending_key, notes[i])
    end
  end
  return units
end

-- Too few units: a split bucket that is not drained asks for a lease first
-- (DRY, not an attempt); units other attempts may give back are CONTENDED;
-- else the stock's refusal.
if why then
  if not drained then
    return {'DRY', string.format('%.0f', available)}
  end
  local pending = pending_elsewhere()
  if pending > 0 and available + pending >= count then
    return refuse({'CONTENDED', string.format('%.0f', math.max(available, 0)),
      string.format('%.0f', pending)})
  end
  return refuse({why, said})
end

local left = redis.call('HINCRBY', sku_key, 'available', -count)
if next_tat then
  redis.call('HSET', buyer_key, 'n', string.format('%.0f', bought + count),
    't', string.format('%.3f', next_tat))
else
  redis.call('HINCRBY', buyer_key, 'n', count_arg)
end
local held_until = string.format('%.0f', now_ms + tonumber(ARGV[7]))
redis.call('PEXPIREAT', buyer_key, held_until)
hold_record(res_key, held_until, user_id, count_arg, ARGV[5], ARGV[6], order_id, attempt,
  requester ~= '' and client or nil)
redis.call('SADD', winners_key, order_id)
redis.call('PEXPIREAT', winners_key, held_until)
redis.call('HSET', pending_key, order_id, count_arg .. ':' .. ARGV[9])
local note_life = deadline_ms - now_ms + 1000
if redis.call('PTTL', pending_key) < note_life then
  redis.call('PEXPIRE', pending_key, note_life)
end
return {'OK', string.format('%.0f', left)}
