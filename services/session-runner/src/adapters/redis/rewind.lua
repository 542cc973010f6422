--[[
  Truncates the log and applies the queue and call changes in one write (R28, R29).

  KEYS (keys.ts SESSION_KEY_ORDER):
    1 meta  2 log  3 queue  4 keys  5 sites  6 calls  7 steps  8 requests  9 counters  10 prompts
  ARGV[1]: JSON object (session-scripts.ts rewindArgs):
    ttlMs      number: the retention (expire-session.lua)
    logLength  number: the log length the rewind was computed on
    toLength   number: the log keeps entries [0, toLength)
    meta       string: the SessionMeta JSON
    requeue    string[]: QueuedItem JSONs (itemId their LAST property), placed before the queue in this order
    dropItems  string[]: item ids removed from the queue
    dropCalls  string[]: call ids removed with their tool call sites (`<callId>|tool:...`)
    dropSteps  string[]: step ids removed with their request ids (which become free again)
  Returns:
    <string>  rewound: the session's version after this write
    -1  session not found (nothing written)
    -5  the log length is not `logLength` (nothing written)
    -8  toLength is outside [0, log length] (nothing written)
]]
--- @include "includes/session-version"
--- @include "includes/expire-session"
--- @include "includes/queue-element"
--- @include "includes/write-meta"

local args = cjson.decode(ARGV[1])

local function rewind()
  if redis.call('EXISTS', KEYS[1]) == 0 then
    return -1
  end
  local length = redis.call('LLEN', KEYS[2])
  if length ~= tonumber(args.logLength) then
    return -5
  end
  local toLength = tonumber(args.toLength)
  if not toLength or toLength < 0 or toLength > length or toLength % 1 ~= 0 then
    return -8
  end

  -- Validated: write from here on.
  -- LTRIM key 0 -1 would keep everything: an empty log is a DEL.
  if toLength == 0 then
    redis.call('DEL', KEYS[2])
  else
    redis.call('LTRIM', KEYS[2], 0, toLength - 1)
  end

  if #args.dropItems > 0 then
    local drop = {}
    for _, id in ipairs(args.dropItems) do
      drop[id] = true
    end
    for _, element in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do
      local id = itemIdOf(element)
      if id and drop[id] then
        redis.call('LREM', KEYS[3], 1, element)
      end
    end
  end

  -- LPUSH from the last to the first: the first requeued item ends up at the head.
  for j = #args.requeue, 1, -1 do
    redis.call('LPUSH', KEYS[3], args.requeue[j])
  end

  if #args.dropCalls > 0 then
    local dropped = {}
    for _, callId in ipairs(args.dropCalls) do
      redis.call('HDEL', KEYS[6], callId)
      dropped[callId] = true
    end
    -- A site is `<callId>|<origin>:<site>`; only a tool's sites go with its call (hook items stay queued).
    for _, site in ipairs(redis.call('SMEMBERS', KEYS[5])) do
      local bar = string.find(site, '|', 1, true)
      if bar and dropped[string.sub(site, 1, bar - 1)] and string.sub(site, bar + 1, bar + 5) == 'tool:' then
        redis.call('SREM', KEYS[5], site)
      end
    end
  end

  for _, stepId in ipairs(args.dropSteps) do
    local step = redis.call('HGET', KEYS[7], stepId)
    if step then
      local requestId = cjson.decode(step).requestId
      if type(requestId) == 'string' then
        redis.call('HDEL', KEYS[8], requestId)
      end
      redis.call('HDEL', KEYS[7], stepId)
    end
  end

  writeMeta(args.meta)
  return (nextVersion())
end

return expireSession(args.ttlMs, rewind())
