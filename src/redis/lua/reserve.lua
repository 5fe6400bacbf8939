#!lua
-- reserve.lua: the admission decisions of a batch of reservations for one SKU
-- (one bucket of a split SKU), taken one after the other in arrival order, in
-- one atomic call (docs/contract.md §2; batch admission in redis/admission.rs).
-- A batch of one is the single-call path. Each request is decided exactly as
-- if it were alone: it reads the state the requests before it in the batch
-- left (stock, the buyer's units and rate limit, a replay of an id admitted
-- earlier in the batch), so N requests in one call answer what N calls in the
-- same order would.
--
-- Reads and checks first, writes last: Lua has no rollback, so nothing of a
-- request is written unless every one of its checks passed. The `#!lua` shebang
-- makes Redis refuse the script whole when it is out of memory, instead of
-- failing half-way through the writes. A command error while one request is
-- decided (pcall below) fails that request alone ({'ERROR', text}); the
-- requests before it keep their outcome, the ones after it are still decided.
-- What the batch shares (the SKU hash, the clock, the outbox length) is read
-- once, and its shared writes (stock, winners, the sold-out flag, the one
-- outbox entry of every request it admitted) are made once after the last
-- request: a request costs the commands of its own keys.
-- A reservation is a hold of one line: its fit (rate limit, buyer's rules,
-- stock), its record and the batch's shared writes are lib/hold.lua's, the
-- same as a line of order.lua and of order_hold.lua; the replay, DRY and
-- the outbox entry are this script's.
--
-- KEYS[1] sku hash        (available, limit, total; the sale terms `so`, `sc`,
--                          `rp`: lib/hold.lua's hold_gate)
-- KEYS[2] outbox stream
-- KEYS[3] winners set     (request ids that took stock; lets a sold-out api node
--                          tell a replay from a new request without calling Redis)
-- then per request i (1-based):
-- KEYS[2+2i] reservation hash
-- KEYS[3+2i] buyer hash   (`n`: live units of this buyer for this SKU;
--                          `t`: next attempt time of the rate limit, `limits.per_user_*`;
--                          `x`: the buyer's holds of this SKU that lapsed unpaid,
--                          counted by finish.lua)
-- ARGV[1] sku_id  ARGV[2] reservation ttl ms  ARGV[3] record retention ms
-- ARGV[4] outbox max length  ARGV[5] sold-out Pub/Sub channel
-- ARGV[6] buyer attempts per second (0 = no rate limit)  ARGV[7] buyer burst
-- ARGV[8] the SKU's bucket count the caller routed with  ARGV[9] event subject
--         (`<sku>`, or `<sku>.<bucket>` for a bucket of a split SKU)
-- ARGV[10] lapsed holds that refuse a buyer (`limits.max_lapsed_holds`; 0 = off)
-- then per request i: ARGV[6+5i] request_id  ARGV[7+5i] user_id  ARGV[8+5i] count
--   ARGV[9+5i] the requester (domain/ownership.rs): '' ownership not enforced
--   (auth off), 'c<name>' a client (recorded; another client's record is
--   TAKEN), 'a<name>' an operator (recorded; may replay anyone's)
--   ARGV[10+5i] the request's pass: '0' none, '1' a verified pass claimed
--   by its own call (pass_claim.lua), or '<k>:<keep_until_ms>' a verified
--   pass this script claims for the hold (`r:<sku>:<request_id>`) in the key
--   KEYS[k] (after every request's two keys) until that Unix ms: another
--   hold's claim there is PASS_USED, nothing written (lib/pass.lua). A SKU
--   with `requires_pass` refuses a hold without one: PASS_REQUIRED.
--
-- Returns one reply per request, in the order given; an admitted one is
-- {'OK', available after it, created_ms, expires_ms, the outbox entry's id},
-- then, when the entry carries several, its index in the entry (from 0) and
-- how many it carries.
--
-- A split SKU (redis/buckets): this script runs on the buyer's bucket. A
-- bucket holds a leased share of the stock; when it cannot serve the request
-- and its `drained` flag is not set (the pool has not yet answered empty), the
-- answer is DRY: the caller leases more from the pool and retries. Only a
-- drained bucket answers SOLD_OUT/INSUFFICIENT and raises the sold-out flag.
-- With one bucket there is no pool: the bucket is always "drained".
--
-- Every value returned is text, but for the available and the place in the
-- entry, which are whole numbers far below 2^53 given as integer replies (a
-- Lua number made text costs a printf; Redis writes an integer reply itself).

local sku_key, outbox_key, winners_key = KEYS[1], KEYS[2], KEYS[3]
local sku_id = ARGV[1]
local ttl_ms = tonumber(ARGV[2])
local retention_ms = tonumber(ARGV[3])
local outbox_max = tonumber(ARGV[4])
local channel = ARGV[5]
local rps, burst = tonumber(ARGV[6]), tonumber(ARGV[7])
local subject = ARGV[9] or sku_id
local max_lapsed = tonumber(ARGV[10])
local requests = (#ARGV - 10) / 5

-- What every request of the batch shares is read once: the SKU (bucket) hash,
-- the clock, the outbox length. The requests then change local copies, and
-- the shared writes (stock, winners, sold-out) are made once at the end, so
-- each request costs only its own keys' commands. Each request still sees
-- what the ones before it did.

-- 0. the caller's layout must be this bucket's: a stale cache re-routes
local sku = redis.call('HMGET', sku_key, 'available', 'limit', 'buckets', 'drained', 'so', 'sc',
  'rp')
local buckets = sku[3] or '1'
if sku[1] and buckets ~= (ARGV[8] or '1') then
  local replies = {}
  for i = 1, requests do
    replies[i] = {'LAYOUT', buckets}
  end
  return replies
end
local split = buckets ~= '1'
local drained = (not split) or sku[4] == '1'
local loaded = sku[1] and sku[2]
local available = tonumber(sku[1] or '0')
local limit = tonumber(sku[2] or '0')
-- the SKU has sale terms (a window, a pass required): judged per request
local gated = sku[5] or sku[6] or sku[7]

-- One clock (Redis TIME) for every api node and every request of the batch
-- (lib/hold.lua).
local now_ms, created, expires, held_until = hold_times(ttl_ms, retention_ms)
local outbox_len = redis.call('XLEN', outbox_key)
local taken = 0
local winners = {}
-- what the batch's one outbox entry tells of each admitted request, in
-- order: its reply, buyer, count and client (false for none), and of the
-- first the available after it: the first in locals, the others four slots
-- each in one flat table. A call that admits one (a quiet SKU's) builds no
-- table for the others, and each reply is built whole by its constructor: a
-- table grown one slot at a time is rehashed at each power of two, which
-- under callgrind made a call of one ~8k instructions dearer.
local first_reply, first_user, first_count, first_left, first_client
local admitted_rows

local function reserve_one(res_key, buyer_key, request_id, user_id, count_arg, requester, pass)
  local count = tonumber(count_arg)
  local carries = (pass == '0') and '0' or '1'
  local client, checked = nil, false
  if requester ~= '' then
    client, checked = string.sub(requester, 2), string.sub(requester, 1, 1) == 'c'
  end

  -- 1. idempotent replay: the stored outcome wins, a different user/count is a
  -- mismatch, and so is a line of an order (its `order` field): a single
  -- reservation never replays an order's line. Another client's record (its
  -- `client` field; read by the same HMGET) is TAKEN, checked first and
  -- telling nothing of it; a record of no client is anyone's. EXISTS first:
  -- almost every request is new, and an HMGET of a missing key answers
  -- seven nils Lua makes a table of (~8k instructions a request under
  -- callgrind, against an integer's reply).
  if redis.call('EXISTS', res_key) == 1 then
    local prior = redis.call('HMGET', res_key, 'user', 'count', 'status', 'created_ms',
      'expires_ms', 'order', 'client')
    if checked and prior[7] and prior[7] ~= client then
      return {'TAKEN'}
    end
    if prior[1] ~= user_id or tonumber(prior[2]) ~= count or prior[6] then
      return {'MISMATCH'}
    end
    return {'REPLAY', prior[3], prior[4], prior[5]}
  end

  -- 2. a SKU that is not loaded is refused: never read a missing key as 0 or
  -- unlimited, and never create a key for it (not even the rate limit's)
  if not loaded then
    return {'NOT_LOADED'}
  end

  -- 2b. the SKU's sale terms by Redis's clock (lib/hold.lua): nothing written
  if gated then
    local gate, opens = hold_gate(sku[5], sku[6], sku[7], carries, now_ms)
    if gate then
      return {gate, opens}
    end
  end

  -- 2c. a pass buys once: another hold's claim refuses, nothing written (not
  -- even an attempt of the rate limit, as when the claim is its own call)
  local claim_key, keep_until, holder
  if #pass > 1 then
    local k, until_ms = string.match(pass, '^(%d+):(%d+)$')
    claim_key, keep_until = KEYS[tonumber(k)], tonumber(until_ms)
    holder = 'r:' .. sku_id .. ':' .. request_id
    local state, other = pass_claim_state(claim_key, holder)
    if state == 'USED' then
      return {'PASS_USED', other}
    end
  end

  -- 3.-5. the line's fit (lib/hold.lua): the buyer's rate limit (after the
  -- replay check: a replay is never limited; an allowed attempt counts
  -- whatever the checks below decide, so a bot cannot probe for free), the
  -- cap on lapsed holds and the per-buyer limit, then the stock. The rate
  -- limit's time lives in the buyer's hash beside the live-unit count, so an
  -- admitted reservation writes both in the one HSET it needs anyway.
  local left = available - taken
  local why, said, bound, next_tat, alone, bought = hold_fit(buyer_key, count, limit, left, now_ms,
    rps, burst, max_lapsed, ARGV[10])
  if why == 'RATE_LIMITED' then
    return {why, said}
  end
  if why then
    -- a split bucket that is not drained asks for a lease first (not an attempt)
    if not drained and (why == 'SOLD_OUT' or why == 'INSUFFICIENT') then
      return {'DRY', string.format('%.0f', left)}
    end
    -- a refusal still records the attempt (rate limit on)
    return buyer_note_attempt({why, said, bound}, buyer_key, next_tat, now_ms, alone)
  end

  -- bounded outbox: when the broker stops confirming, refuse instead of growing forever
  if outbox_len >= outbox_max then
    return buyer_note_attempt({'BACKPRESSURE'}, buyer_key, next_tat, now_ms, alone)
  end

  -- 6. this request's writes; the shared ones follow the loop
  -- (HINCRBY takes the count as given: a number made text costs a printf)
  if next_tat then
    redis.call('HSET', buyer_key, 'n', string.format('%.0f', bought + count), 't',
      string.format('%.3f', next_tat))
  else
    redis.call('HINCRBY', buyer_key, 'n', count_arg)
  end
  redis.call('PEXPIREAT', buyer_key, held_until)
  -- the entry keeps the available its `reserved` event tells, so the relay's
  -- republish tells the same body (docs/contract.md §18); the owner goes
  -- with the deduction to the ledger row. The reply gives it as a number (an
  -- integer reply: made text by Redis, not by a printf in Lua)
  local left = available - taken - count
  hold_record(res_key, held_until, user_id, count_arg, created, expires, nil, nil, client)
  if claim_key then
    pass_keep(claim_key, holder, keep_until, now_ms)
  end
  -- the outbox entry is the batch's, written after the last request (below)
  -- (the fifth slot is the entry's id, set below)
  local reply = {'OK', left, created, expires, false}
  if not first_reply then
    first_reply, first_user, first_count, first_left = reply, user_id, count_arg, left
    first_client = client or false
  else
    local at = (#winners - 1) * 4
    admitted_rows = admitted_rows or {}
    admitted_rows[at + 1], admitted_rows[at + 2] = reply, user_id
    admitted_rows[at + 3], admitted_rows[at + 4] = count_arg, client or false
  end
  -- counted only once every write of the request is made
  taken = taken + count
  winners[#winners + 1] = request_id
  return reply
end

local replies = {}
for i = 1, requests do
  local ok, reply = pcall(reserve_one, KEYS[2 + 2 * i], KEYS[3 + 2 * i],
    ARGV[6 + 5 * i], ARGV[7 + 5 * i], ARGV[8 + 5 * i], ARGV[9 + 5 * i], ARGV[10 + 5 * i])
  if ok then
    replies[i] = reply
  else
    replies[i] = {'ERROR', hold_error_text(reply)}
  end
end

-- 7. the batch's one outbox entry: every admitted request's deduction, in
-- order; each OK reply names it and, when shared, its place in it (index, of
-- how many), so the entry is removed once the broker confirmed all of them.
-- One request alone writes the fields one deduction always had; several
-- write lists (`,`-joined: ids and numbers never hold a comma; client names
-- may, so `clients` is `<bytes>:<name>` per request, `0:` for none) and the
-- available after the last of them (`available_last`: each one's follows
-- from the counts after it). redis/outbox_entry.rs reads both.
local admitted = #winners
if admitted > 0 then
  local fields
  if admitted == 1 then
    fields = {'request_id', winners[1], 'sku_id', sku_id, 'user_id', first_user,
      'count', first_count, 'created_ms', created, 'expires_ms', expires,
      'available', string.format('%.0f', first_left), 'client', first_client}
  else
    -- winner w > 1 is at admitted_rows[(w - 2) * 4 + 1 .. 4]
    local users, counts = {first_user}, {first_count}
    local any_client = first_client
    for w = 2, admitted do
      local at = (w - 2) * 4
      users[w], counts[w] = admitted_rows[at + 2], admitted_rows[at + 3]
      any_client = any_client or admitted_rows[at + 4]
    end
    local clients_text = false
    if any_client then
      local function labeled(name)
        if name then
          return #name .. ':' .. name
        end
        return '0:'
      end
      local clients = {labeled(first_client)}
      for w = 2, admitted do
        clients[w] = labeled(admitted_rows[(w - 2) * 4 + 4])
      end
      clients_text = table.concat(clients)
    end
    fields = {'request_id', table.concat(winners, ','), 'sku_id', sku_id,
      'user_id', table.concat(users, ','), 'count', table.concat(counts, ','),
      'created_ms', created, 'expires_ms', expires,
      'available_last', string.format('%.0f', available - taken), 'clients', clients_text}
  end
  -- the last pair (the client, `false` for none) is left off when there is
  -- none
  local entry = redis.call('XADD', outbox_key, '*', unpack(fields, 1, fields[16] and 16 or 14))
  first_reply[5] = entry
  if admitted > 1 then
    first_reply[6], first_reply[7] = 0, admitted
    for w = 2, admitted do
      local reply = admitted_rows[(w - 2) * 4 + 1]
      reply[5], reply[6], reply[7] = entry, w - 1, admitted
    end
  end
end

-- 8. the shared writes, once for the batch (lib/hold.lua)
hold_batch_writes(sku_key, winners_key, taken, winners, held_until, drained, channel, subject)
return replies
