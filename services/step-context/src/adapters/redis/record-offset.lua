--[[
  Records a consumed bus offset; never moves it backwards.

  KEYS[1]: an offsets hash (stepContextKeys(prefix).offsets)
  ARGV[1]: JSON object (feed-scripts.ts recordOffsetArgs):
    field   string: `<topic>:<partition>`
    offset  string: the offset, canonical decimal (includes/offsets.lua)
  Returns: 1 when stored, 0 when at or below the stored offset (nothing written).
]]
--- @include "includes/offsets"

local args = cjson.decode(ARGV[1])
local stored = redis.call('HGET', KEYS[1], args.field)
if stored and not offsetAbove(args.offset, stored) then return 0 end
redis.call('HSET', KEYS[1], args.field, args.offset)
return 1
