--[[
  The context pass's ONE commit (R2): rows, queue drain, step record (by id and by
  request id) and meta, all or nothing. Every check runs before the first write.

  A pass computed on a known session version (a state the runner holds) names it:
  the commit then refuses unless no other write came since. That also proves that the
  session exists, the log length and the queue: a pass that drains the whole queue it
  read says so (ARGV[13]) and one LTRIM drains it. Otherwise, when the drain is the
  queue's head (its first and last ids are checked, one element when it is one item) one
  LTRIM drains it; else the log length and every drained item are checked. The version
  is read once, for the check and for the next version, whose second part is the
  client's random nonce (ARGV[14]) instead of the server's time.

  The step record names its system prompt by id (`systemRef`); the text is stored once per
  session in `prompts`, and `seq` field `prompt` names the prompt the session's last commit
  stored or used. A commit sends the text only when the prompt is not that one; a commit
  that names another prompt without its text is refused (-9) and sent again with it.

  A step inside a run that kept its prefix changes only the meta's counters (steps,
  lastStepAt, lastRequestEnd): such a commit names its version and sends no meta, and the
  counters go to `seq` (fields `steps`, `stepAt`, `requestEnd`, read over the meta's) in the
  write that issues the version. A commit with a meta writes it whole and drops them.

  KEYS (keys.ts SESSION_KEY_ORDER):
    1 meta  2 log  3 queue  4 keys  5 sites  6 calls  7 steps  8 requests  9 seq  10 prompts
    11 (only with CTXFLOW_CONTEXT_ROW_EVENTS) the session's row outbox stream: each row
       committed is also XADDed there (field `row`), in this same write (redis-row-outbox.ts)
  ARGV:
    1 the log length the pass was computed on
    2 stepId
    3 StepRecord JSON (with `systemRef` ARGV[8] when ARGV[8] is not '')
    4 requestId, or '' for none
    5 SessionMeta JSON, or '' when only its counters change (ARGV[10..12]; ARGV[6] names a version)
    6 the session version the pass was computed on, or '-' for none
    7 nDrain
    8 the id of the step's system prompt, or '' for none
    9 the prompt's text, or '' when `seq` field `prompt` is ARGV[8]
    10 11 12 the meta's steps, lastStepAt and lastRequestEnd (used when ARGV[5] is '')
    13 'all': the drain is the whole queue of the state at version ARGV[6]; '' otherwise
    14 a random nonce for the next version (never the same twice), or '' for the server's time
    15 .. 14+nDrain   ids of the queued items these rows deliver
    15+nDrain ..      LogEntry JSON rows, in log order
  Returns:
    {v}          committed: the session's version after this write
    <string>     duplicate: the requestId is committed; the StepRecord JSON of that step (nothing written)
    -1           session not found (nothing written)
    -5           the log length is not ARGV[1], or the version is not ARGV[6], or ARGV[5] is ''
                 and ARGV[6] names no version (nothing written)
    -6           a drained item is no longer queued (nothing written)
    -9           the prompt ARGV[8] is not the session's and its text was not sent (nothing written)
]]
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

-- The version is read once: checked here, and the next one follows it.
local seq = redis.call('HMGET', KEYS[9], 'version', 'prompt')
local current = seq[1] or ''
local expected = ARGV[6]
if expected ~= '-' and current ~= expected then
  return -5
end
-- A version is only ever written with the meta (create-session.lua) and no script deletes a
-- meta, so a non-empty version that matches proves the session exists.
if (expected == '-' or expected == '') and redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end

local countersOnly = ARGV[5] == ''
if countersOnly and (expected == '-' or expected == '') then
  return -5
end
local promptId, promptText = ARGV[8], ARGV[9]
if promptId ~= '' and promptText == '' and seq[2] ~= promptId then
  return -9
end

local nDrain = tonumber(ARGV[7])
local D = 15 -- the first drained id
local firstRow = D + nDrain
-- Queue elements end with "itemId":"<id>"} (enqueue.lua, rewind.lua): no decoding needed,
-- and only the element's tail is looked at (ids are short; the content may be long).
local function idOf(element)
  return string.match(string.sub(element, -96), '"itemId":"([^"]*)"}$')
end
local function endsWithId(element, id)
  local tail = '"itemId":"' .. id .. '"}'
  return string.sub(element, -#tail) == tail
end

-- removeDrained(): the drain's write, chosen by the checks below.
local removeDrained
-- With the version current, the queue is the one the pass read, and a pass drains a run
-- of it in order: when its first and last ids are the queue's first and n-th elements,
-- the drain is the queue's head (a step delivers the whole queue), and the elements in
-- between need not be fetched.
local isHead = expected ~= '-'
if ARGV[13] == 'all' and expected ~= '-' and expected ~= '' then
  -- The version proves the queue is the one the pass read, all of which it drains.
  isHead = true
elseif isHead and nDrain > 0 then
  local first = redis.call('LINDEX', KEYS[3], 0)
  isHead = first and endsWithId(first, ARGV[D])
  if isHead and nDrain > 1 then
    local last = redis.call('LINDEX', KEYS[3], nDrain - 1)
    isHead = last and endsWithId(last, ARGV[D + nDrain - 1])
  end
end
if isHead then
  -- The version proves the log length, and one LTRIM drains.
  removeDrained = function()
    if nDrain > 0 then
      redis.call('LTRIM', KEYS[3], nDrain, -1)
    end
  end
else
  if redis.call('LLEN', KEYS[2]) ~= tonumber(ARGV[1]) then
    return -5
  end
  local byId = {}
  for _, element in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do
    local id = idOf(element)
    if id then
      byId[id] = element
    end
  end
  for j = D, D + nDrain - 1 do
    if not byId[ARGV[j]] then
      return -6
    end
  end
  removeDrained = function()
    for j = D, D + nDrain - 1 do
      local element = byId[ARGV[j]]
      if element then
        redis.call('LREM', KEYS[3], 1, element)
        byId[ARGV[j]] = nil
      end
    end
  end
end

-- Validated: write from here on.
local CHUNK = 1000
local from = firstRow
local last = #ARGV
while from <= last do
  local to = math.min(from + CHUNK - 1, last)
  redis.call('RPUSH', KEYS[2], unpack(ARGV, from, to))
  from = to + 1
end
removeDrained()
if KEYS[11] then
  for j = firstRow, last do
    redis.call('XADD', KEYS[11], '*', 'row', ARGV[j])
  end
end
redis.call('HSET', KEYS[7], ARGV[2], ARGV[3])
if requestId ~= '' then
  redis.call('HSET', KEYS[8], requestId, ARGV[2])
end
-- `seq` fields written with the version, in the same call.
local fields = {}
if countersOnly then
  fields = { 'steps', ARGV[10], 'stepAt', ARGV[11], 'requestEnd', ARGV[12] }
else
  redis.call('SET', KEYS[1], ARGV[5])
  redis.call('HDEL', KEYS[9], 'steps', 'stepAt', 'requestEnd')
end
if promptText ~= '' then
  redis.call('HSET', KEYS[10], promptId, promptText)
  fields[#fields + 1] = 'prompt'
  fields[#fields + 1] = promptId
end
if ARGV[14] == '' then
  return { (versionAfter(current, unpack(fields))) }
end
return { (versionWith(current, ARGV[14], unpack(fields))) }
