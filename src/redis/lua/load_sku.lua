#!lua
-- load_sku.lua: a SKU's stock moved in Redis by a delta, without clobbering live
-- reservations: a creation, a restock or a cut (src/ops/stock_step.rs).
--
-- KEYS[1] sku hash  KEYS[2] this step's marker (`<p>{sku}:op:<op_id>`)
-- KEYS[3] (optional) the SKU's cuts taken and not yet settled (`<p>{sku}:cuts`)
-- ARGV[1] delta of available (signed) when the SKU is already loaded
-- ARGV[2] available to set when the SKU is not loaded (a creation's stock)
-- ARGV[3] limit_per_user  ARGV[4] total_stock (a creation's; a move adds the delta)
-- ARGV[5] sold-out Pub/Sub channel  ARGV[6] sku_id  ARGV[7] marker ttl ms
-- ARGV[8] bucket count  ARGV[9] tags of buckets 1.. (comma separated)
-- ARGV[10] 'create' (absent: the same) or 'move'. Only a creation loads a SKU
--          Redis does not hold: a SKU that existed is loaded by warm-up alone,
--          with its buyer state, so a move of one answers {'NOT_LOADED', ''}.
-- ARGV[11] id of the movement applied (0: none yet, a cut before its commit).
--          One warm-up counted already (id <= the hash's `mv`) answers
--          {'INCLUDED', ''} and moves nothing; one applied raises `mt`, the
--          last movement Redis holds, which a warm-up that read MySQL before
--          it must not overwrite (warmup.lua).
-- ARGV[12] step id  ARGV[13] now ms: with KEYS[3], the step is recorded there
--          as '<units>:<ms>' until settled (kept, or given back).
--
-- Returns {'OK', available} or {'BELOW_RESERVED', available} when a negative delta
-- would take Redis below zero (units already promised to buyers), or
-- {'LAYOUT', buckets} when the SKU is loaded with another bucket count
-- (ops/sku_admin.rs re-splits first).
--
-- A split SKU (ARGV[8] > 1) keeps the stock not yet leased to a bucket in
-- `pool`: a new one starts with everything there (bucket 0's `available` 0),
-- and a restock moves the pool. A cut deeper than the pool is BELOW_RESERVED:
-- the caller then reclaims what the pool lacks from the buckets and tries
-- again, or gives it back (redis/sku_split_cut.rs).
--
-- A Redis Cluster client re-sends a script whose connection dropped, and a
-- retried or swept step runs again: the marker makes a second run answer the
-- first one's result instead of applying the delta again.

local sku_key = KEYS[1]
local applied = redis.call('GET', KEYS[2])
if applied then
  return {'OK', applied}
end
local delta = tonumber(ARGV[1])
local buckets = ARGV[8] or '1'
local move = ARGV[10] == 'move'
local loaded = redis.call('HMGET', sku_key, 'available', 'buckets', 'pool', 'mv')
if not loaded[1] and move then
  return {'NOT_LOADED', ''}
end
if loaded[1] and tonumber(ARGV[11] or '0') > 0 and tonumber(loaded[4] or '0') >= tonumber(ARGV[11]) then
  return {'INCLUDED', ''}
end
if loaded[1] and (loaded[2] or '1') ~= buckets then
  return {'LAYOUT', loaded[2] or '1'}
end

-- Marks the step done, records a cut for settling, moves the total.
local function done(value)
  if loaded[1] and move then
    redis.call('HINCRBY', sku_key, 'total', delta)
  else
    redis.call('HSET', sku_key, 'total', ARGV[4])
  end
  redis.call('SET', KEYS[2], value, 'PX', ARGV[7])
  local id = tonumber(ARGV[11] or '0')
  if id > tonumber(redis.call('HGET', sku_key, 'mt') or '0') then
    redis.call('HSET', sku_key, 'mt', ARGV[11])
  end
  if KEYS[3] and delta < 0 then
    redis.call('HSET', KEYS[3], ARGV[12], string.format('%.0f', -delta) .. ':' .. ARGV[13])
  end
  return {'OK', value}
end

if buckets ~= '1' then
  local pool
  if loaded[1] then
    pool = tonumber(loaded[3] or '0') + delta
    if pool < 0 then
      return {'BELOW_RESERVED', loaded[3] or '0'}
    end
  else
    pool = tonumber(ARGV[2])
    redis.call('HSET', sku_key, 'available', '0', 'buckets', buckets, 'tags', ARGV[9])
  end
  redis.call('HSET', sku_key, 'pool', string.format('%.0f', pool), 'limit', ARGV[3])
  return done(string.format('%.0f', pool))
end
local current = loaded[1]
local available
if current then
  available = tonumber(current) + delta
  if available < 0 then
    return {'BELOW_RESERVED', current}
  end
else
  available = tonumber(ARGV[2])
end
redis.call('HSET', sku_key, 'available', string.format('%.0f', available), 'limit', ARGV[3])
soldout_follow(sku_key, available, ARGV[5], ARGV[6])
return done(string.format('%.0f', available))
