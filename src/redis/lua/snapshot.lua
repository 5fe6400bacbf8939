#!lua flags=no-writes
-- snapshot.lua: one atomic read of a SKU's (or one bucket's) Redis state for
-- the reconciler.
--
-- KEYS[1] sku hash  KEYS[2] winners set  KEYS[3] transfers-out hash  KEYS[4] transfers-in set
-- ARGV[1] reservation key prefix (`<p>{<sku>}:res:`)  ARGV[2] most winners to list
-- ARGV[3] transfer ids to look up in KEYS[4], comma separated (split SKUs)
--
-- Returns {available, total, adjust, limit, pool, drained,
--          x, id1, entry1, ..., c, in1, ..., n, rid1, status1, count1, created_ms1, ...}
-- x pending transfers out (`dest:units:secs`), c flags ('1' credited here) for
-- the ARGV[3] ids, and n = -1 when there are more winners than ARGV[2] (records
-- not listed); available = '' when the SKU is not loaded. A winner whose
-- record expired is listed with status '' and created_ms '0'. `created_ms`
-- (Redis TIME at admission) lets the reconciler tell work that is merely in
-- flight from work that is stuck. A rejected record whose unit went back to
-- `available` (`returned`) is listed with count 0: it holds no stock.

local sku = redis.call('HMGET', KEYS[1], 'available', 'total', 'adjust', 'limit', 'pool', 'drained')
if not sku[1] then
  return {'', '', '', '', '', '', '0', '0', '0'}
end
local out = {sku[1], sku[2] or '0', sku[3] or '0', sku[4] or '0', sku[5] or '0', sku[6] or '0'}
local pending = redis.call('HGETALL', KEYS[3])
table.insert(out, tostring(#pending / 2))
for _, v in ipairs(pending) do
  table.insert(out, v)
end
local asked = {}
for id in string.gmatch(ARGV[3], '[^,]+') do
  table.insert(asked, id)
end
table.insert(out, tostring(#asked))
for _, id in ipairs(asked) do
  table.insert(out, tostring(redis.call('SISMEMBER', KEYS[4], id)))
end
local size = redis.call('SCARD', KEYS[2])
if size > tonumber(ARGV[2]) then
  table.insert(out, '-1')
  return out
end
local members = redis.call('SMEMBERS', KEYS[2])
table.insert(out, tostring(#members))
for _, rid in ipairs(members) do
  local rec = redis.call('HMGET', ARGV[1] .. rid, 'status', 'count', 'created_ms', 'returned')
  table.insert(out, rid)
  table.insert(out, rec[1] or '')
  if rec[4] then
    table.insert(out, '0')
  else
    table.insert(out, rec[2] or '0')
  end
  table.insert(out, rec[3] or '0')
end
return out
