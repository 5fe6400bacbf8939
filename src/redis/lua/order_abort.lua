#!lua
-- order_abort.lua: the undo of an order attempt held line by line, on the
-- order's slot. Three steps share it (ARGV[3]):
--   'own'   the api that holds the attempt gives it up (a line refused):
--           HOLDING -> ABORTING for that attempt.
--   'sweep' the sweeper takes an intent whose deadline passed (its api died
--           or stalled): HOLDING -> ABORTING, or an ABORTING one whose undo
--           was never finished. The deadline check is the commit's, in the
--           same slot: exactly one of commit and abort wins.
--   'done'  every line is undone: ABORTING -> ABORTED, out of the index;
--           the record then lives as long as the attempt's tombstones
--           (its deadline plus the margin ARGV[4]), not the record
--           lifetime: while a tombstone lives, the next attempt's number
--           must be above it (order_intent.lua: one past the last), and
--           after, an ABORTED record is no order (GET answers 404).
-- Nothing is ever held by an ABORTING or ABORTED attempt once its lines are
-- undone (order_release.lua), and the next attempt starts after ABORTED.
--
-- KEYS[1] order record  KEYS[2] intent index
-- ARGV[1] order_id  ARGV[2] attempt ('' for the sweeper: the record's)
-- ARGV[3] step  ARGV[4] ('done') the tombstones' margin past the deadline, ms
--
-- Returns {'ABORTING', attempt, user, lines, deadline} (undo these lines),
-- {'DONE'},
-- {'NOT_DUE'} (sweep: the deadline has not passed), or {'NO', status,
-- attempt} (nothing to undo here: the record's status and attempt; a final
-- or missing record leaves the index).

local record_key, index_key = KEYS[1], KEYS[2]
local order_id, step = ARGV[1], ARGV[3]
local r = redis.call('HMGET', record_key, 'status', 'attempt', 'deadline_ms', 'user', 'lines')
local status = r[1]
local mine = ARGV[2] == '' or r[2] == ARGV[2]
if not (mine and (status == 'HOLDING' or status == 'ABORTING')) then
  if status ~= 'HOLDING' and status ~= 'ABORTING' then
    redis.call('ZREM', index_key, order_id)
  end
  return {'NO', status or 'MISSING', r[2] or ''}
end
if step == 'done' then
  if status ~= 'ABORTING' then
    return {'NO', status}
  end
  local t = redis.call('TIME')
  local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local life = math.max(tonumber(r[3] or '0') - now_ms, 0) + tonumber(ARGV[4] or '0')
  redis.call('HSET', record_key, 'status', 'ABORTED')
  redis.call('HDEL', record_key, 'deadline_ms')
  redis.call('PEXPIRE', record_key, math.max(life, 1))
  redis.call('ZREM', index_key, order_id)
  return {'DONE'}
end
if step == 'sweep' then
  local t = redis.call('TIME')
  local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if now_ms <= tonumber(r[3] or '0') then
    return {'NOT_DUE'}
  end
end
redis.call('HSET', record_key, 'status', 'ABORTING')
return {'ABORTING', r[2], r[4], r[5], r[3] or '0'}
