--[[
  offsetAbove(offset, stored): whether the bus offset `offset` is above `stored`, both
  canonical decimal strings (no leading zeros; Kafka offsets exceed what a Lua number holds
  exactly): the longer is the larger, equal lengths compare as strings.
]]
local function offsetAbove(offset, stored)
  if #offset ~= #stored then return #offset > #stored end
  return offset > stored
end
