--[[
  Replaces an agent if its version is still the expected one (optimistic concurrency).

  KEYS:
    1 the agent hash (keys.ts agent(): fields `record`, `version`)
  ARGV:
    1 expected version
    2 the new version
    3 AgentRecord JSON
  Returns:
     1  replaced
    -1  agent not found (nothing written)
    -7  the stored version is not ARGV[1] (nothing written)
]]
local version = redis.call('HGET', KEYS[1], 'version')
if not version then
  return -1
end
if version ~= ARGV[1] then
  return -7
end
redis.call('HSET', KEYS[1], 'record', ARGV[3], 'version', ARGV[2])
return 1
