-- lib/soldout.lua: the sold-out marker of a SKU (bucket) hash, written only
-- here (docs/architecture.md, "Where each rule lives"). The hash's `soldout`
-- field is the durable marker; a change is told on the sold-out Pub/Sub
-- channel as 'S:<subject>' (raised) or 'A:<subject>' (cleared), so every api
-- node's board follows it. Joined ahead of each script that uses it
-- (src/redis/scripts.rs); the scripts call only these functions.

-- Sets the marker without telling; true when it was not set before.
local function soldout_set(sku_key)
  return redis.call('HSET', sku_key, 'soldout', '1') == 1
end

-- Removes the marker without telling; true when it was set before.
local function soldout_unset(sku_key)
  return redis.call('HDEL', sku_key, 'soldout') == 1
end

-- Tells every api node: sold out (true) or selling again (false).
local function soldout_tell(channel, subject, sold_out)
  if sold_out then
    redis.call('PUBLISH', channel, 'S:' .. subject)
  else
    redis.call('PUBLISH', channel, 'A:' .. subject)
  end
end

-- Raises the marker and tells it, only when it was not raised.
local function soldout_raise(sku_key, channel, subject)
  if soldout_set(sku_key) then
    soldout_tell(channel, subject, true)
    return true
  end
  return false
end

-- Clears the marker and tells it, only when it was raised.
local function soldout_clear(sku_key, channel, subject)
  if soldout_unset(sku_key) then
    soldout_tell(channel, subject, false)
    return true
  end
  return false
end

-- The marker follows the stock: raised at 0 or below, cleared above.
local function soldout_follow(sku_key, available, channel, subject)
  if available > 0 then
    return soldout_clear(sku_key, channel, subject)
  end
  return soldout_raise(sku_key, channel, subject)
end
