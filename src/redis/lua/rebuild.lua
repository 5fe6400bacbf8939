#!lua
-- rebuild.lua: restore the buyer side of a SKU from MySQL, one batch of ledger
-- rows per call (warm-up after Redis lost its data, and the reconciler's repair
-- after Redis lost acknowledged writes). contract §8: after it, a retry of any
-- accepted request id is a replay and no buyer can exceed the limit.
--
-- Per row, by the ledger's status and what Redis holds:
-- - no record, ledger live (RESERVED/CONFIRMED): write the record, add it to the
--   winners set, and add its units to the buyer's counter (the counter and the
--   records were lost together: a script's writes are atomic in a snapshot and
--   in the AOF, so a lost record is a lost counter increment);
-- - no record, ledger final (RELEASED/REJECTED): write a tombstone so a replay
--   answers the final state instead of taking stock again;
-- - a tombstone (created_ms '0': a confirm or release mirrored while Redis had
--   lost the record), ledger live: restored like a missing record;
-- - record RESERVED, ledger CONFIRMED: the status (a lost confirm mirror);
-- - record RESERVED, ledger RELEASED/REJECTED: the lost release mirror, exactly
--   as finish.lua would do it (stock and quota back once);
-- - anything else: already right, or in flight — left alone.
-- A row released by expiry (lapsed '1') whose release this call writes (a
-- tombstone, or the lost mirror) also counts the lapse in the buyer's `x`, as
-- finish.lua does, with the buyer's hash kept at least as long as the record:
-- the lapse counts (`limits.max_lapsed_holds`) of the replay window come back
-- from MySQL's EXPIRED rows. A tombstone or final record Redis still holds was
-- counted when it was written, so a repeat counts nothing twice.
-- Every step is conditional on what Redis holds, so the script is idempotent
-- and safe beside live traffic (each call is atomic; a batch is small).
--
-- KEYS[1] sku hash  KEYS[2] winners set
-- KEYS[1 + 2i] reservation hash of row i, KEYS[2 + 2i] its buyer's hash (`n` live units; i >= 1)
-- ARGV[1] sold-out channel  ARGV[2] event subject (`<sku>`, or `<sku>.<bucket>` of a split SKU)
-- then 9 per row: request_id, user_id, count, status, created_ms, expires_ms,
--   keep_ms (how much longer Redis would still hold it), returns_stock ('1' for a
--   rejection whose unit stays in MySQL's stock), lapsed ('1' for a release by
--   expiry)
-- Returns {restored, finished, unchanged}.

local sku_key, winners_key = KEYS[1], KEYS[2]
local restored, finished, unchanged = 0, 0, 0
local n = (#KEYS - 2) / 2

local function stock_back(count)
  if redis.call('HEXISTS', sku_key, 'available') == 0 then
    return
  end
  local available = redis.call('HINCRBY', sku_key, 'available', count)
  if available > 0 then
    soldout_clear(sku_key, ARGV[1], ARGV[2])
  end
end

local function count_lapse(user_key, keep_ms)
  redis.call('HINCRBY', user_key, 'x', 1)
  if redis.call('PTTL', user_key) < keep_ms then
    redis.call('PEXPIRE', user_key, keep_ms)
  end
end

for i = 1, n do
  local res_key, user_key = KEYS[1 + 2 * i], KEYS[2 + 2 * i]
  local a = 2 + (i - 1) * 9
  local rid, user, count_s, status = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  local created, expires, keep_ms, returns = ARGV[a + 5], ARGV[a + 6], tonumber(ARGV[a + 7]), ARGV[a + 8]
  local lapsed = status == 'RELEASED' and ARGV[a + 9] == '1'
  local count = tonumber(count_s)
  local live = status == 'RESERVED' or status == 'CONFIRMED'
  local rec = redis.call('HMGET', res_key, 'status', 'created_ms')
  local held = rec[1]
  -- A tombstone (created_ms '0', written by finish.lua when the record was
  -- gone) never counted in the winners set or the buyer's counter: for a live
  -- row it is restored like a missing record.
  if not held or (live and rec[2] == '0') then
    redis.call('HSET', res_key, 'user', user, 'count', count_s, 'status', status,
      'created_ms', created, 'expires_ms', expires)
    if status == 'REJECTED' then
      -- a restored rejection holds no Redis stock: warm-up or repair set `available`
      redis.call('HSET', res_key, 'returned', '1')
    end
    redis.call('PEXPIRE', res_key, keep_ms)
    redis.call('SADD', winners_key, rid)
    if live then
      redis.call('HINCRBY', user_key, 'n', count)
      if redis.call('PTTL', user_key) < keep_ms then
        redis.call('PEXPIRE', user_key, keep_ms)
      end
    elseif lapsed then
      count_lapse(user_key, keep_ms)
    end
    restored = restored + 1
  elseif held == 'RESERVED' and status == 'CONFIRMED' then
    redis.call('HSET', res_key, 'status', 'CONFIRMED')
    finished = finished + 1
  elseif held == 'RESERVED' and not live then
    redis.call('HSET', res_key, 'status', status)
    buyer_give_back(user_key, count)
    if status == 'RELEASED' then
      stock_back(count)
      if lapsed then
        count_lapse(user_key, keep_ms)
      end
    elseif returns == '1' then
      redis.call('HSET', res_key, 'returned', '1')
      stock_back(count)
    end
    finished = finished + 1
  else
    unchanged = unchanged + 1
  end
end
return {tostring(restored), tostring(finished), tostring(unchanged)}
