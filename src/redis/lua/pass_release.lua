#!lua
-- pass_release.lua: give a pass back when the admission refused the hold
-- that claimed it (stock, limit, ...): a refused hold does not use a pass up.
-- Only the claim of that very hold is removed, never another's.
--
-- KEYS[1] the pass's claim  ARGV[1] the hold that claimed it
--
-- Returns 1 when released, 0 when the claim was not this hold's (or gone).

if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
