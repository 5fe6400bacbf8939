#!lua
-- order_extend.lua: mirror an order's extension, decided in MySQL
-- (`POST /v1/orders/{id}/extend`), onto its Redis record: the new
-- `expires_ms` and `ext` (the order row's extensions), and a lifetime that
-- reaches past the new time by the record retention, so a replay answers
-- the moved time. Each line's record is moved by extend.lua. A time not
-- later than the record's changes nothing (a repeat is a no-op); a final
-- or missing record stays as it is.
--
-- KEYS[1] order record  ARGV[1] new expires_ms  ARGV[2] record retention ms
-- ARGV[3] extensions the order row has had, this one included
-- Returns 1 when the record changed, 0 otherwise.
local record = redis.call('HMGET', KEYS[1], 'status', 'expires_ms')
if record[1] ~= 'RESERVED' or tonumber(record[2] or '0') >= tonumber(ARGV[1]) then
  return 0
end
redis.call('HSET', KEYS[1], 'expires_ms', ARGV[1], 'ext', ARGV[3])
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local keep_ms = tonumber(ARGV[1]) - now_ms + tonumber(ARGV[2])
local left = redis.call('PTTL', KEYS[1])
if left >= 0 and left < keep_ms then
  redis.call('PEXPIRE', KEYS[1], keep_ms)
end
return 1
