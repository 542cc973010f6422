--[[
  Request-id retention (request-retention.ts): deletes the request-id records of a session
  past its last `keep`, oldest step first (by the step record's `ordinal`; a record whose
  step is gone sorts first). Not a session script: it issues no version and sets no TTL (it only
  deletes, and the keys already carry the session's).

  KEYS:
    1 requests (hash: requestId -> stepId)   2 steps (hash: stepId -> StepRecord JSON)
  ARGV[1]: JSON object (session-scripts.ts trimRequests)
    keep   number: the records to keep (a whole number >= 1)
  Returns:
    the number of records deleted
]]
local keep = tonumber(cjson.decode(ARGV[1]).keep)
local count = redis.call('HLEN', KEYS[1])
if count <= keep then
  return 0
end
local flat = redis.call('HGETALL', KEYS[1])
local records = {}
for i = 1, #flat, 2 do
  local ordinal = -1
  local step = redis.call('HGET', KEYS[2], flat[i + 1])
  if step then
    local ok, decoded = pcall(cjson.decode, step)
    if ok and type(decoded) == 'table' and type(decoded.ordinal) == 'number' then
      ordinal = decoded.ordinal
    end
  end
  records[#records + 1] = { flat[i], ordinal }
end
table.sort(records, function(a, b)
  return a[2] < b[2]
end)
local drop = count - keep
for i = 1, drop, 500 do
  local ids = {}
  for j = i, math.min(i + 499, drop) do
    ids[#ids + 1] = records[j][1]
  end
  redis.call('HDEL', KEYS[1], unpack(ids))
end
return drop
