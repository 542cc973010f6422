--[[
  The context pass's ONE commit (R2): rows, queue drain, step record (by id and by
  request id) and meta, all or nothing. Every check runs before the first write.

  KEYS (keys.ts SESSION_KEY_ORDER):
    1 meta  2 log  3 queue  4 keys  5 sites  6 calls  7 steps  8 requests  9 seq
  ARGV:
    1 the log length the pass was computed on
    2 stepId
    3 StepRecord JSON
    4 requestId, or '' for none
    5 SessionMeta JSON
    6 nDrain
    7 .. 6+nDrain   ids of the queued items these rows deliver
    7+nDrain ..     LogEntry JSON rows, in log order
  Returns:
    1            committed
    <string>     duplicate: the requestId is committed; the StepRecord JSON of that step (nothing written)
    -1           session not found (nothing written)
    -5           the log length is not ARGV[1] (nothing written)
    -6           a drained item is no longer queued (nothing written)
]]
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end

local requestId = ARGV[4]
if requestId ~= '' then
  local known = redis.call('HGET', KEYS[8], requestId)
  if known then
    local step = redis.call('HGET', KEYS[7], known)
    if step then
      return step
    end
  end
end

if redis.call('LLEN', KEYS[2]) ~= tonumber(ARGV[1]) then
  return -5
end

-- Queue elements end with "itemId":"<id>"} (enqueue.lua, rewind.lua): no decoding needed.
local nDrain = tonumber(ARGV[6])
local queue = redis.call('LRANGE', KEYS[3], 0, -1)
local byId = {}
for _, element in ipairs(queue) do
  local id = string.match(element, '"itemId":"([^"]*)"}$')
  if id then
    byId[id] = element
  end
end
for j = 7, 6 + nDrain do
  if not byId[ARGV[j]] then
    return -6
  end
end

-- Validated: write from here on.
local CHUNK = 1000
local from = 7 + nDrain
local last = #ARGV
while from <= last do
  local to = math.min(from + CHUNK - 1, last)
  redis.call('RPUSH', KEYS[2], unpack(ARGV, from, to))
  from = to + 1
end
for j = 7, 6 + nDrain do
  local element = byId[ARGV[j]]
  if element then
    redis.call('LREM', KEYS[3], 1, element)
    byId[ARGV[j]] = nil
  end
end
redis.call('HSET', KEYS[7], ARGV[2], ARGV[3])
if requestId ~= '' then
  redis.call('HSET', KEYS[8], requestId, ARGV[2])
end
redis.call('SET', KEYS[1], ARGV[5])
return 1
