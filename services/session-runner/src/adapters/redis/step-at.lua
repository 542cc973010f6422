--[[
  Reads the step record of ordinal `ordinal` among a session's surviving steps (a rewind
  deletes the records it cuts, so at most one has it). Writes nothing. The record's JSON is
  decoded here and only the matching one is sent back.

  KEYS:
    1 steps (hash: stepId -> StepRecord JSON)
  ARGV[1]: JSON object (session-scripts.ts stepAt):
    ordinal  number: the step's ordinal (a whole number >= 1)
  Returns:
    <string>  the step record's JSON as stored
    nil       no surviving step has that ordinal
]]
local ordinal = tonumber(cjson.decode(ARGV[1]).ordinal)
for _, json in ipairs(redis.call('HVALS', KEYS[1])) do
  local ok, decoded = pcall(cjson.decode, json)
  if ok and type(decoded) == 'table' and decoded.ordinal == ordinal then
    return json
  end
end
return false
