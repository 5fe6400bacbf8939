#!lua
-- order_commit.lua: step 3 of an order held line by line, once every line
-- is held: the intent moves HOLDING -> RESERVED (the point of no return) if
-- it is still this attempt and its deadline has not passed, leaves the
-- intent index, and the order's one outbox entry is written beside it (the
-- first line's deduction, naming every line, as order.lua's entries do).
-- The sweeper's abort (order_abort.lua) checks the same fields in the same
-- slot, so exactly one of the two wins.
--
-- KEYS[1] order record  KEYS[2] intent index  KEYS[3] order outbox stream
-- ARGV[1] order_id  ARGV[2] attempt  ARGV[3] first line's sku_id
-- ARGV[4] first line's count
-- ARGV[5] each line's SKU available after its hold, comma-separated in line
--         order (kept with the entry: the relay's republish of it tells the
--         `reserved` event the api told)
--
-- Returns {'OK', entry_id}, {'LATE'} (the deadline passed: undo and answer
-- retry), {'DONE'} (this attempt is committed already: a re-sent call; its
-- entry is in the outbox) or {'LOST', status} (the attempt is no longer
-- holding: undone, or another attempt's).

local record_key, index_key, outbox_key = KEYS[1], KEYS[2], KEYS[3]
local r = redis.call('HMGET', KEYS[1], 'status', 'attempt', 'deadline_ms', 'user', 'lines',
  'created_ms', 'expires_ms', 'client')
if r[1] ~= 'HOLDING' or r[2] ~= ARGV[2] then
  if r[2] == ARGV[2] and r[1] ~= 'ABORTING' and r[1] ~= 'ABORTED' then
    return {'DONE'}
  end
  return {'LOST', r[1] or 'MISSING'}
end
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now_ms > tonumber(r[3]) then
  return {'LATE'}
end
redis.call('HSET', record_key, 'status', 'RESERVED')
redis.call('HDEL', record_key, 'deadline_ms')
redis.call('ZREM', index_key, ARGV[1])
-- the owner the intent recorded goes with the deduction to the order row
local entry
if r[8] then
  entry = redis.call('XADD', outbox_key, '*', 'request_id', ARGV[1], 'sku_id', ARGV[3],
    'user_id', r[4], 'count', ARGV[4], 'created_ms', r[6], 'expires_ms', r[7], 'order', r[5],
    'available', ARGV[5] or '', 'client', r[8])
else
  entry = redis.call('XADD', outbox_key, '*', 'request_id', ARGV[1], 'sku_id', ARGV[3],
    'user_id', r[4], 'count', ARGV[4], 'created_ms', r[6], 'expires_ms', r[7], 'order', r[5],
    'available', ARGV[5] or '')
end
return {'OK', entry}
