#!lua
-- order.lua: the admission decisions of a batch of whole orders on a
-- standalone Redis (docs/architecture.md, "Orders"), taken one after the
-- other in arrival order, in one atomic call (the lanes of redis/lanes.rs);
-- a batch of one is the single-call path. For each order every line is
-- held, or none is. Standalone Redis runs the script atomically whatever
-- hash tags the keys carry (a Redis Cluster would refuse it CROSSSLOT;
-- orders there go through the intent protocol the architecture describes).
--
-- Each order is decided exactly as if it were alone: it reads the state the
-- orders before it in the batch left (stock, the buyer's units, an order id
-- or reservation held earlier in the batch), so N orders in one call answer
-- what N calls in the same order would. Per order, reads and checks of every
-- line first, writes last (Lua has no rollback), so a refused order writes
-- nothing at all; `#!lua` makes Redis refuse the script whole when it is out
-- of memory. A command error while one order is decided (pcall below) fails
-- that order alone ({'ERROR', text}); the orders before it keep their
-- outcome, the ones after it are still decided.
--
-- What the batch shares is read once and written once: the clock, each
-- SKU's hash (stock, limit, layout) and each outbox's length are read at
-- first use; each SKU's stock, winners set and sold-out flag are written
-- once after the last order. An order costs the commands of its own keys.
--
-- Each line is held exactly as a single reservation of its SKU is
-- (reserve.lua), through the same helpers (lib/hold.lua: the line's fit, its
-- record, the batch's writes of one SKU): the record `res:<order_id>` (plus
-- `order`, the order id), the buyer's live units `n` (so `limit_per_user`
-- counts order lines and single reservations together), the stock, the
-- winners set, the sold-out marker. An order has ONE outbox entry, in its shard's stream (the first
-- line's deduction carrying the whole line list, `order`), as an order held
-- line by line has (order_commit.lua): one XADD and one XDEL per order, and
-- a relay that reads only the SKUs' streams (a release before orders) never
-- sees an order.
--
-- ARGV[1] reservation ttl ms  ARGV[2] record retention ms
-- ARGV[3] outbox max length   ARGV[4] sold-out Pub/Sub channel
-- ARGV[5] lapsed holds that refuse a buyer a line (`limits.max_lapsed_holds`,
--         the buyer hash's `x` that finish.lua counts, as in reserve.lua; 0 = off)
-- ARGV[6] buyer attempts per second on a SKU (`limits.per_user_rps`, 0 = no
--         rate limit)  ARGV[7] buyer burst: each line is an attempt of the
--         buyer on its SKU, as a reservation is (lib/buyer.lua)
-- then per order, in turn: order_id, user_id, the line list
-- (`sku:count,...`), n its line count, the requester ('' ownership not
-- enforced, 'c<name>' a client, 'a<name>' an operator: as in reserve.lua),
-- '1' when the order carries a verified pass (else '0': a line of a SKU
-- with `requires_pass` is refused PASS_REQUIRED), then per line (sorted by
-- SKU id) sku_id, count.
-- KEYS per order, in turn: its record (`<p>{oi:<n>}:order:<order_id>`:
-- user, lines, status, created_ms, expires_ms, `v` its format:
-- redis/orders.rs), its shard's outbox stream (`<p>{oi:<n>}:outbox`), then
-- per line: sku hash, reservation hash, buyer hash, winners set.
--
-- Returns one reply per order, in the order given:
--   {'OK', created_ms, expires_ms, entry_id, available_1, ..., available_n}
--   {'REPLAY', status, created_ms, expires_ms}   the order was held before
--   {'MISMATCH'}        the order id was used with another user or other lines,
--                       or a line's SKU already has a reservation of that id
--   {'TAKEN'}           the order id names another client's order, or
--                       another client's reservation on a line's SKU
--   {'REFUSED', i, why, a, b}  line i cannot be held: why is NOT_LOADED,
--                       SPLIT (a split SKU: not on this path), the SKU's
--                       sale terms (lib/hold.lua's hold_gate, by the SKU
--                       hash's `so`, `sc`, `rp`: SALE_NOT_STARTED, a = the
--                       opening ms; SALE_ENDED; PASS_REQUIRED), RATE (the
--                       buyer is over the rate limit on the line's SKU: a =
--                       the wait in ms; nothing written), LAPSED (a =
--                       the buyer's lapsed holds of the SKU, b = the cap),
--                       LIMIT (a = bought, b = limit), SOLD_OUT,
--                       INSUFFICIENT (a = left)
--   {'BACKPRESSURE'}    the order shard's outbox is full
--   {'BUSY'}            an attempt of the intent protocol holds this order id
--   {'ERROR', text}     a command failed while this order was decided
-- Every value returned is a string, so no number loses precision, but the
-- availables: integers, exact far beyond any stock (2^53), and a Lua number
-- turned into text costs a printf per line (as does any number passed to
-- redis.call: the record's time to live is formatted once per call).
-- Cost, counted under callgrind per 3-line order in calls of 16: 351,000
-- instructions before these and the inlined indexing below, 286,000 after.

local ttl_ms = tonumber(ARGV[1])
local retention_ms = tonumber(ARGV[2])
local outbox_max = tonumber(ARGV[3])
local channel = ARGV[4]
local max_lapsed = tonumber(ARGV[5])
local rps, burst = tonumber(ARGV[6]), tonumber(ARGV[7])

-- One clock (Redis TIME) for every order of the batch (lib/hold.lua).
local now_ms, created, expires, held_until = hold_times(ttl_ms, retention_ms)

-- Each SKU's hash as read once, with what the batch took of it so far.
-- `skus_touched` keeps first-use order, so the shared writes are in a
-- fixed order.
local skus = {}
local skus_touched = {}
local function sku_state(sku_key, winners_key, sku_id)
  local state = skus[sku_key]
  if not state then
    local h = redis.call('HMGET', sku_key, 'available', 'limit', 'buckets', 'so', 'sc', 'rp')
    state = {
      loaded = h[1] and h[2],
      split = (h[3] or '1') ~= '1',
      available = tonumber(h[1] or '0'),
      limit = tonumber(h[2] or '0'),
      gated = h[4] or h[5] or h[6],
      opens = h[4],
      closes = h[5],
      pass_needed = h[6],
      taken = 0,
      winners = {},
      winners_key = winners_key,
      sku_id = sku_id,
    }
    skus[sku_key] = state
    skus_touched[#skus_touched + 1] = sku_key
  end
  return state
end

-- Each outbox stream's length as read once, plus the entries added since.
local outbox_lens = {}
local function outbox_len(outbox_key)
  local len = outbox_lens[outbox_key]
  if not len then
    len = redis.call('XLEN', outbox_key)
    outbox_lens[outbox_key] = len
  end
  return len
end

-- Line i of the order whose keys start at KEYS[k] is refused after its
-- rate check: with the rate limit on (`tats`), the attempts of lines 1..i
-- count, as a refused reservation's does; `reply` is returned.
local function refused_after_rate(k, i, tats, reply)
  if tats then
    for j = 1, i do
      buyer_note_attempt(nil, KEYS[k + 4 * j], tats[j][1], now_ms, tats[j][2])
    end
  end
  return reply
end

-- The record of an order id not seen before: no field (read as HMGET's nils).
local NO_PRIOR = {}

-- One order: `k` its first KEYS index, `a` its first ARGV index. Line i's
-- keys start at KEYS[k + 4i - 2] (sku hash, reservation, buyer, winners),
-- its args at ARGV[a + 4 + 2i] (sku_id, count); indexed inline, not through
-- closures made per order (they cost 8 % of the script).
local function order_one(k, a, n)
  local order_key, outbox_key = KEYS[k], KEYS[k + 1]
  local order_id, user_id, lines_text = ARGV[a], ARGV[a + 1], ARGV[a + 2]
  local requester = ARGV[a + 4]
  local carries = ARGV[a + 5]
  local client = nil
  if requester ~= '' then
    client = string.sub(requester, 2)
  end

  -- 1. replay: the stored order wins; another user or other lines is a
  -- mismatch (an attempt of the intent protocol, ops/order_saga.rs, shares
  -- the record: one still holding or being undone is BUSY, one undone is no
  -- order). Another client's order (`client`, read by the same HMGET) is
  -- TAKEN, checked first and telling nothing of it.
  -- EXISTS first: almost every order is new, and an HMGET of a missing key
  -- answers six nils Lua makes a table of
  local prior = NO_PRIOR
  if redis.call('EXISTS', order_key) == 1 then
    prior = redis.call('HMGET', order_key, 'user', 'lines', 'status', 'created_ms', 'expires_ms',
      'client')
  end
  if prior[6] and prior[3] ~= 'ABORTED' and string.sub(requester, 1, 1) == 'c'
      and prior[6] ~= client then
    return {'TAKEN'}
  end
  if prior[3] == 'HOLDING' or prior[3] == 'ABORTING' then
    return {'BUSY'}
  end
  if prior[1] and prior[3] ~= 'ABORTED' then
    if prior[1] ~= user_id or prior[2] ~= lines_text then
      return {'MISMATCH'}
    end
    return {'REPLAY', prior[3], prior[4], prior[5]}
  end

  -- 2. every line's checks, nothing written yet
  if outbox_len(outbox_key) >= outbox_max then
    return {'BACKPRESSURE'}
  end
  local states = {}
  -- with the rate limit on, each line's next `t` and whether its buyer hash
  -- held nothing else (lib/buyer.lua)
  local tats = nil
  if rps > 0 then
    tats = {}
  end
  for i = 1, n do
    local ki, ai = k + 4 * i - 2, a + 4 + 2 * i
    local count = tonumber(ARGV[ai + 1])
    local sku = sku_state(KEYS[ki], KEYS[ki + 3], ARGV[ai])
    if not sku.loaded then
      return {'REFUSED', tostring(i), 'NOT_LOADED'}
    end
    if sku.split then
      return {'REFUSED', tostring(i), 'SPLIT'}
    end
    if sku.gated then
      local gate, opens = hold_gate(sku.opens, sku.closes, sku.pass_needed, carries, now_ms)
      if gate then
        return {'REFUSED', tostring(i), gate, opens}
      end
    end
    -- a reservation of the id on the line's SKU: another client's is
    -- TAKEN (telling nothing of it), any other a mismatch; its owner is
    -- read only then (an HMGET per line in place of EXISTS cost ~5k
    -- instructions a line under callgrind)
    if redis.call('EXISTS', KEYS[ki + 1]) == 1 then
      if string.sub(requester, 1, 1) == 'c' then
        local owner = redis.call('HGET', KEYS[ki + 1], 'client')
        if owner and owner ~= client then
          return {'TAKEN'}
        end
      end
      return {'MISMATCH'}
    end
    -- the line's fit (lib/hold.lua): the buyer's rate limit, lapses and
    -- limit, then the stock; a refusal after the rate check notes the
    -- attempts of lines 1..i
    local why, said, bound, next_tat, alone = hold_fit(KEYS[ki + 2], count, sku.limit,
      sku.available - sku.taken, now_ms, rps, burst, max_lapsed, ARGV[5])
    if why == 'RATE_LIMITED' then
      return {'REFUSED', tostring(i), 'RATE', said}
    end
    if tats then
      tats[i] = {next_tat, alone}
    end
    if why then
      return refused_after_rate(k, i, tats, {'REFUSED', tostring(i), why, said, bound})
    end
    states[i] = sku
  end

  -- 3. the order's entry, every line held, then the order record; a line's
  -- stock is counted once its record is written (the shared writes follow
  -- the last order)
  -- each line's available after the order, in line order: the `reserved`
  -- event tells them, and so does the relay's republish of this entry
  local lefts = {}
  for i = 1, n do
    local sku = states[i]
    lefts[i] = string.format('%.0f', sku.available - sku.taken - tonumber(ARGV[a + 5 + 2 * i]))
  end
  -- the owner goes with the deduction to the order row and its lines
  local entry
  if client then
    entry = redis.call('XADD', outbox_key, '*', 'request_id', order_id, 'sku_id', ARGV[a + 6],
      'user_id', user_id, 'count', ARGV[a + 7], 'created_ms', created, 'expires_ms', expires,
      'order', lines_text, 'available', table.concat(lefts, ','), 'client', client)
  else
    entry = redis.call('XADD', outbox_key, '*', 'request_id', order_id, 'sku_id', ARGV[a + 6],
      'user_id', user_id, 'count', ARGV[a + 7], 'created_ms', created, 'expires_ms', expires,
      'order', lines_text, 'available', table.concat(lefts, ','))
  end
  outbox_lens[outbox_key] = outbox_lens[outbox_key] + 1
  local reply = {'OK', created, expires, entry}
  for i = 1, n do
    local ki = k + 4 * i - 2
    local count = ARGV[a + 5 + 2 * i]
    local sku = states[i]
    -- the buyer's live units: what HGET read plus count (no printf)
    redis.call('HINCRBY', KEYS[ki + 2], 'n', count)
    if tats then
      redis.call('HSET', KEYS[ki + 2], 't', string.format('%.3f', tats[i][1]))
    end
    redis.call('PEXPIREAT', KEYS[ki + 2], held_until)
    hold_record(KEYS[ki + 1], held_until, user_id, count, created, expires, order_id, nil,
      client)
    sku.taken = sku.taken + tonumber(count)
    sku.winners[#sku.winners + 1] = order_id
    reply[#reply + 1] = sku.available - sku.taken
  end
  if client then
    redis.call('HSET', order_key, 'user', user_id, 'lines', lines_text, 'status', 'RESERVED',
      'created_ms', created, 'expires_ms', expires, 'v', '1', 'client', client)
  else
    redis.call('HSET', order_key, 'user', user_id, 'lines', lines_text, 'status', 'RESERVED',
      'created_ms', created, 'expires_ms', expires, 'v', '1')
  end
  redis.call('PEXPIREAT', order_key, held_until)
  return reply
end

local replies = {}
local k, a = 1, 8
while a <= #ARGV do
  local n = tonumber(ARGV[a + 3])
  local ok, reply = pcall(order_one, k, a, n)
  if ok then
    replies[#replies + 1] = reply
  else
    replies[#replies + 1] = {'ERROR', hold_error_text(reply)}
  end
  k = k + 2 + 4 * n
  a = a + 6 + 2 * n
end

-- 4. the shared writes, once per SKU for the batch (lib/hold.lua; a line is
-- never of a split SKU here, so every SKU counts as drained)
for _, sku_key in ipairs(skus_touched) do
  local sku = skus[sku_key]
  hold_batch_writes(sku_key, sku.winners_key, sku.taken, sku.winners, held_until, true, channel,
    sku.sku_id)
end
return replies
