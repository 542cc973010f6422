-- Records a consumed bus offset; never moves it backwards.
-- KEYS[1]: an offsets hash (stepContextKeys(prefix).offsets)
-- ARGV[1]: field `<topic>:<partition>`
-- ARGV[2]: the offset, canonical decimal string (no leading zeros)
-- Returns: 1 when stored, 0 when at or below the stored offset (nothing written).

local stored = redis.call('HGET', KEYS[1], ARGV[1])
if stored then
  local offset = ARGV[2]
  local above
  if #offset ~= #stored then above = #offset > #stored else above = offset > stored end
  if not above then return 0 end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
