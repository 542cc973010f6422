--[[
  Removes outbox entries whose events the bus acknowledged; an outbox left empty is
  deleted (a commit writing after this recreates it).

  KEYS: 1 the session's outbox stream (keys.ts outbox)
  ARGV: the stream ids of the entries
  Returns: the entries left in the stream
]]
redis.call('XDEL', KEYS[1], unpack(ARGV))
local left = redis.call('XLEN', KEYS[1])
if left == 0 then
  redis.call('DEL', KEYS[1])
end
return left
