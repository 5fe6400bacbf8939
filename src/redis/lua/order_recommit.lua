#!lua
-- order_recommit.lua: the sweeper's answer to an intent past its deadline
-- that MySQL holds as an order (issue 50 D5). A failover of the order's
-- shard inside the replication lag can lose a commit the api answered 201
-- for: the intent reached the replica, the commit did not, so the record is
-- `HOLDING` again and in the index, while the order was published and
-- applied. Its lines, on other slots, are still held. The sweeper asks
-- MySQL before it undoes (ops/order_sweeper.rs); when MySQL has this very
-- order (same buyer, same lines) this script gives the record MySQL's
-- status and times back and takes it out of the index, releasing nothing.
-- It writes no outbox entry: the order is applied already, and a second
-- entry would only be a duplicate the consumer skips.
--
-- The deadline check is the commit's and the sweep's, in the same slot: an
-- attempt still in time belongs to its api (a new attempt after a lost
-- record), never to this script.
--
-- KEYS[1] order record  KEYS[2] intent index
-- ARGV[1] order_id  ARGV[2] user_id  ARGV[3] the line list (`sku:count,...`)
-- ARGV[4] MySQL's status  ARGV[5] MySQL's expires_ms
-- ARGV[6] MySQL's extensions  ARGV[7] record retention ms
--
-- Returns {'RECOMMITTED', attempt}, {'NOT_DUE'}, {'OTHER'} (an attempt of
-- another buyer or other lines: not the order MySQL holds) or {'NO', status}
-- (no open intent: nothing written; a final or missing record leaves the
-- index, as order_abort.lua does).

local record_key, index_key = KEYS[1], KEYS[2]
local order_id = ARGV[1]
local r = redis.call('HMGET', record_key, 'status', 'attempt', 'deadline_ms', 'user', 'lines')
local status = r[1]
if status ~= 'HOLDING' and status ~= 'ABORTING' then
  redis.call('ZREM', index_key, order_id)
  return {'NO', status or 'MISSING'}
end
if r[4] ~= ARGV[2] or r[5] ~= ARGV[3] then
  return {'OTHER'}
end
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now_ms <= tonumber(r[3] or '0') then
  return {'NOT_DUE'}
end
redis.call('HSET', record_key, 'status', ARGV[4], 'expires_ms', ARGV[5], 'ext', ARGV[6])
redis.call('HDEL', record_key, 'deadline_ms')
redis.call('ZREM', index_key, order_id)
local keep_ms = tonumber(ARGV[5]) - now_ms + tonumber(ARGV[7])
local left = redis.call('PTTL', record_key)
if left >= 0 and left < keep_ms then
  redis.call('PEXPIRE', record_key, keep_ms)
end
return {'RECOMMITTED', r[2]}
