--[[
  Replaces an agent if its version is still the expected one (optimistic concurrency).

  KEYS:
    1 the agent hash (keys.ts agent(): fields `record`, `version`)
  ARGV[1]: JSON object (session-scripts.ts replaceAgentArgs):
    expected  string: the expected version (decimal)
    version   string: the new version (decimal)
    agent     string: the AgentRecord JSON
  Returns:
     1  replaced
    -1  agent not found (nothing written)
    -7  the stored version is not `expected` (nothing written)
]]
local args = cjson.decode(ARGV[1])
local version = redis.call('HGET', KEYS[1], 'version')
if not version then
  return -1
end
if version ~= args.expected then
  return -7
end
redis.call('HSET', KEYS[1], 'record', args.agent, 'version', args.version)
return 1
