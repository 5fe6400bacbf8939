-- sale_terms.lua: a SKU's sale terms onto one of its hashes (the home hash,
-- or a bucket's of a split SKU: each is its own call, in its own slot), where
-- the admission scripts read them in the HMGET they make of the SKU anyway
-- (lib/hold.lua, hold_gate). docs/contract.md §19.
--
-- KEYS[1] sku (bucket) hash
-- ARGV[1] opens ms ('' for none)  ARGV[2] closes ms ('' for none)
-- ARGV[3] '1' when a hold needs a verified pass, '0' when not
--
-- A term that is not set is removed, so a SKU without terms carries no field
-- and costs the admission scripts nothing but three nil reads. Written even
-- on a hash not loaded yet (a creation writes its terms before its stock, so
-- no hold is ever admitted without them); `available` alone tells a loaded
-- SKU, which these fields never create. Returns {'OK'}.

local fields = {'so', ARGV[1], 'sc', ARGV[2], 'rp', ARGV[3] == '1' and '1' or ''}
for i = 1, #fields, 2 do
  if fields[i + 1] == '' then
    redis.call('HDEL', KEYS[1], fields[i])
  else
    redis.call('HSET', KEYS[1], fields[i], fields[i + 1])
  end
end
return {'OK'}
