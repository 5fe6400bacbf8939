#!lua
-- order_intent.lua: step 1 of an order held line by line (a Redis Cluster,
-- or an order with a line on a split SKU; docs/architecture.md, "Orders"):
-- the durable intent, written before any line is held. The record takes
-- `status = HOLDING`, a new attempt number (growing: Redis' clock in ms,
-- or one past the last attempt), the lines and times every line
-- will carry, and a deadline; the order id goes into the intent index of
-- its shard, which the sweeper scans (`order_sweeper.rs`). The record, the
-- index and the order outbox share the shard's hash tag (`{oi:<n>}`), so
-- the commit can move the intent and write the order's one outbox entry in
-- one script.
--
-- KEYS[1] order record  KEYS[2] the shard's intent index (zset, score =
--         deadline ms)  KEYS[3] the shard's order outbox stream
-- ARGV[1] order_id  ARGV[2] user_id  ARGV[3] the line list (`sku:count,...`)
-- ARGV[4] reservation ttl ms  ARGV[5] record retention ms
-- ARGV[6] hold timeout ms (the deadline)  ARGV[7] outbox max length
-- ARGV[8] the requester ('' ownership not enforced, 'c<name>' a client,
--         'a<name>' an operator: as in reserve.lua)
--
-- Returns:
--   {'HOLD', attempt, created_ms, expires_ms, deadline_ms}
--                                               hold the lines as attempt
--   {'REPLAY', status, created_ms, expires_ms}  the order was held before
--   {'MISMATCH'}      held before with another buyer or other lines
--   {'TAKEN'}         the order id names another client's order
--   {'BUSY'}          an attempt is holding or being undone: retry shortly
--   {'BACKPRESSURE'}  the shard's order outbox is full
-- An attempt that was aborted leaves the record `ABORTED`: the next one
-- starts over, with any buyer and lines (a refused order holds nothing).

local record_key, index_key, outbox_key = KEYS[1], KEYS[2], KEYS[3]
local order_id, user_id, lines_text = ARGV[1], ARGV[2], ARGV[3]
local ttl_ms, retention_ms = tonumber(ARGV[4]), tonumber(ARGV[5])
local hold_ms, outbox_max = tonumber(ARGV[6]), tonumber(ARGV[7])

local requester = ARGV[8] or ''
local client = nil
if requester ~= '' then
  client = string.sub(requester, 2)
end

local prior = redis.call('HMGET', record_key, 'user', 'lines', 'status', 'attempt',
  'created_ms', 'expires_ms', 'client')
local status = prior[3]
-- another client's order (or attempt) tells nothing of itself
if prior[7] and status ~= 'ABORTED' and string.sub(requester, 1, 1) == 'c'
    and prior[7] ~= client then
  return {'TAKEN'}
end
if status == 'HOLDING' or status == 'ABORTING' then
  return {'BUSY'}
end
if status and status ~= 'ABORTED' then
  if prior[1] ~= user_id or prior[2] ~= lines_text then
    return {'MISMATCH'}
  end
  return {'REPLAY', status, prior[5], prior[6]}
end
if redis.call('XLEN', outbox_key) >= outbox_max then
  return {'BACKPRESSURE'}
end

local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Attempts only grow, also past a lost or expired record (whose lines or
-- tombstones may still be there): the clock, or one past the last attempt.
local attempt = string.format('%.0f', math.max(now_ms, tonumber(prior[4] or '0') + 1))
local created = string.format('%.0f', now_ms)
local expires = string.format('%.0f', now_ms + ttl_ms)
local deadline = now_ms + hold_ms
redis.call('HSET', record_key, 'user', user_id, 'lines', lines_text, 'status', 'HOLDING',
  'attempt', attempt, 'created_ms', created, 'expires_ms', expires,
  'deadline_ms', string.format('%.0f', deadline), 'v', '1')
if client then
  redis.call('HSET', record_key, 'client', client)
else
  -- an attempt after an aborted one of another client owns nothing of it
  redis.call('HDEL', record_key, 'client')
end
redis.call('PEXPIRE', record_key, ttl_ms + retention_ms)
redis.call('ZADD', index_key, deadline, order_id)
return {'HOLD', attempt, created, expires, string.format('%.0f', deadline)}
