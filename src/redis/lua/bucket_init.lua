#!lua
-- bucket_init.lua: create or update the hash of bucket b >= 1 of a split SKU
-- (redis/buckets). Bucket 0 is the home hash, written by load_sku/warmup.
--
-- KEYS[1] bucket hash  KEYS[2] its transfers-out hash
-- ARGV[1] bucket count  ARGV[2] this bucket's index  ARGV[3] limit_per_user
-- ARGV[4] 'reset' to empty the bucket (warm-up: Redis lost it, or a forced
--         reload), 'keep' to keep its stock (creation and restock)
-- The limit is copied here because reserve.lua reads it from the buyer's bucket.
-- A reset keeps the SKU's sale terms (`so`, `sc`, `rp`: sale_terms.lua), which
-- a stock reload has no business dropping: a bucket never admits without them.

if ARGV[4] == 'reset' then
  local terms = redis.call('HMGET', KEYS[1], 'so', 'sc', 'rp')
  redis.call('DEL', KEYS[1], KEYS[2])
  if terms[1] then
    redis.call('HSET', KEYS[1], 'so', terms[1])
  end
  if terms[2] then
    redis.call('HSET', KEYS[1], 'sc', terms[2])
  end
  if terms[3] then
    redis.call('HSET', KEYS[1], 'rp', terms[3])
  end
end
redis.call('HSETNX', KEYS[1], 'available', '0')
redis.call('HSET', KEYS[1], 'buckets', ARGV[1], 'bucket', ARGV[2], 'limit', ARGV[3])
return {'OK'}
