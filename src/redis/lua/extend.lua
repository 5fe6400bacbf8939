#!lua
-- extend.lua: mirror an extension decided in MySQL (`POST .../extend`) onto
-- the Redis reservation record: its new `expires_ms` and `ext` (the row's
-- count of extensions: what proves an extension MySQL lost in a failover,
-- ops/lifecycle/recovered.rs), and lifetimes for the record and the buyer's
-- units that reach past it by the record retention.
-- Idempotent: a time that is not later than the record's changes nothing, so
-- a repeat (or a mirror overtaken by a later one) is a no-op.
--
-- KEYS[1] sku hash  KEYS[2] reservation hash  KEYS[3] buyer hash
-- ARGV[1] new expires_ms  ARGV[2] record retention ms (after expiry)
-- ARGV[4] extensions the row has had, this one included
-- ARGV[3] the SKU's bucket count the caller routed with: a bucket hash that
--         says otherwise answers {'LAYOUT'} and nothing is written
--
-- Returns {'APPLIED'}, {'SAME'} (the record's time is already as late),
-- {'ALREADY', status} (final: MySQL's later decision won), {'MISSING'}.

local sku_key, res_key, user_key = KEYS[1], KEYS[2], KEYS[3]
local expires = tonumber(ARGV[1])

if redis.call('EXISTS', sku_key) == 1
    and (redis.call('HGET', sku_key, 'buckets') or '1') ~= (ARGV[3] or '1') then
  return {'LAYOUT'}
end

local record = redis.call('HMGET', res_key, 'status', 'expires_ms')
if not record[1] then
  return {'MISSING'}
end
if record[1] ~= 'RESERVED' then
  return {'ALREADY', record[1]}
end
if tonumber(record[2] or '0') >= expires then
  return {'SAME'}
end

redis.call('HSET', res_key, 'expires_ms', ARGV[1], 'ext', ARGV[4])
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local keep_ms = expires - now_ms + tonumber(ARGV[2])
for _, key in ipairs({res_key, user_key}) do
  local left = redis.call('PTTL', key)
  if left >= 0 and left < keep_ms then
    redis.call('PEXPIRE', key, keep_ms)
  end
end
return {'APPLIED'}
