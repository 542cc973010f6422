--[[
  Truncates the log and applies the queue and call changes in one write (R28, R29).

  KEYS (keys.ts SESSION_KEY_ORDER):
    1 meta  2 log  3 queue  4 keys  5 sites  6 calls  7 steps  8 requests  9 counters  10 prompts
  ARGV:
    1 the log length the rewind was computed on
    2 toLength: the log keeps entries [0, toLength)
    3 SessionMeta JSON
    4 nRequeue  5 nDropItems  6 nDropCalls  7 nDropSteps
    then nRequeue QueuedItem JSONs (itemId their LAST property), placed before the queue in this order;
    then nDropItems item ids removed from the queue;
    then nDropCalls call ids removed with their tool call sites (`<callId>|tool:...`);
    then nDropSteps step ids removed with their request ids (which become free again).
  Returns:
    <string>  rewound: the session's version after this write
    -1  session not found (nothing written)
    -5  the log length is not ARGV[1] (nothing written)
    -8  toLength is outside [0, log length] (nothing written)
]]
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
local length = redis.call('LLEN', KEYS[2])
if length ~= tonumber(ARGV[1]) then
  return -5
end
local toLength = tonumber(ARGV[2])
if not toLength or toLength < 0 or toLength > length or toLength % 1 ~= 0 then
  return -8
end

-- Validated: write from here on.
local nRequeue, nDropItems, nDropCalls, nDropSteps =
  tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local requeueFrom = 8
local dropItemsFrom = requeueFrom + nRequeue
local dropCallsFrom = dropItemsFrom + nDropItems
local dropStepsFrom = dropCallsFrom + nDropCalls

-- LTRIM key 0 -1 would keep everything: an empty log is a DEL.
if toLength == 0 then
  redis.call('DEL', KEYS[2])
else
  redis.call('LTRIM', KEYS[2], 0, toLength - 1)
end

if nDropItems > 0 then
  local drop = {}
  for j = dropItemsFrom, dropCallsFrom - 1 do
    drop[ARGV[j]] = true
  end
  for _, element in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do
    -- Only the tail: ids are short, the content may be long.
    local id = string.match(string.sub(element, -96), '"itemId":"([^"]*)"}$')
    if id and drop[id] then
      redis.call('LREM', KEYS[3], 1, element)
    end
  end
end

-- LPUSH from the last to the first: the first requeued item ends up at the head.
for j = dropItemsFrom - 1, requeueFrom, -1 do
  redis.call('LPUSH', KEYS[3], ARGV[j])
end

if nDropCalls > 0 then
  local dropped = {}
  for j = dropCallsFrom, dropStepsFrom - 1 do
    redis.call('HDEL', KEYS[6], ARGV[j])
    dropped[ARGV[j]] = true
  end
  -- A site is `<callId>|<origin>:<site>`; only a tool's sites go with its call (hook items stay queued).
  for _, site in ipairs(redis.call('SMEMBERS', KEYS[5])) do
    local bar = string.find(site, '|', 1, true)
    if bar and dropped[string.sub(site, 1, bar - 1)] and string.sub(site, bar + 1, bar + 5) == 'tool:' then
      redis.call('SREM', KEYS[5], site)
    end
  end
end

for j = dropStepsFrom, dropStepsFrom + nDropSteps - 1 do
  local step = redis.call('HGET', KEYS[7], ARGV[j])
  if step then
    local requestId = cjson.decode(step).requestId
    if type(requestId) == 'string' then
      redis.call('HDEL', KEYS[8], requestId)
    end
    redis.call('HDEL', KEYS[7], ARGV[j])
  end
end

redis.call('SET', KEYS[1], ARGV[3])
-- The meta is whole again: counters a step commit wrote apart (commit-step.lua) no longer apply.
redis.call('HDEL', KEYS[9], 'steps', 'stepAt', 'requestEnd')
return (nextVersion())
