--[[
  Reads the step record of ordinal `ordinal` among a session's surviving steps (a rewind
  deletes the records it cuts, so at most one has it). Writes nothing. Only the matching
  record is sent back; the scan is of the session's step records, decoding only candidates.

  KEYS:
    1 steps (hash: stepId -> StepRecord JSON)
  ARGV[1]: JSON object (session-scripts.ts stepAt):
    ordinal  number: the step's ordinal (a whole number >= 1)
  Returns:
    <string>  the step record's JSON as stored
    nil       no surviving step has that ordinal
]]
local ordinal = tonumber(cjson.decode(ARGV[1]).ordinal)
-- A plain search for the ordinal's member picks the candidates (JSON.stringify writes it
-- without spaces); only those are decoded, so a text that merely contains it is not taken.
local member = '"ordinal":' .. string.format('%d', ordinal)
local function candidate(json)
  local at = string.find(json, member, 1, true)
  while at do
    local after = string.sub(json, at + #member, at + #member)
    if after == ',' or after == '}' then
      return true
    end
    at = string.find(json, member, at + 1, true)
  end
  return false
end
for _, json in ipairs(redis.call('HVALS', KEYS[1])) do
  if candidate(json) then
    local ok, decoded = pcall(cjson.decode, json)
    if ok and type(decoded) == 'table' and decoded.ordinal == ordinal then
      return json
    end
  end
end
return false
