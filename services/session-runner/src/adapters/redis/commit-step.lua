--[[
  The context pass's ONE commit (R2): rows, queue drain, step record (by id and by
  request id) and meta, all or nothing. Every check runs before the first write.

  A pass computed on a known session version (a state the runner holds) names it:
  the commit then refuses unless no other write came since. That also proves that the
  session exists, the log length and the queue: a pass that drains the whole queue it
  read sends the number of its items instead of their ids, and one LTRIM drains it.
  Otherwise, when the drain is the queue's head (its first and last ids are checked, one
  element when it is one item) one LTRIM drains it; else the log length and every drained
  item are checked. The version is read once, for the check and for the next version,
  whose second part is the client's random `nonce` instead of the server's time.

  The step record names its system prompt by id (`systemRef`); the text is stored once per
  session in `prompts`, and `counters` field `prompt` names the prompt the session's last
  commit stored or used. A commit sends the text only when the prompt is not that one; a
  commit that names another prompt without its text is refused (-9) and sent again with it.

  A step inside a run that kept its prefix changes only the meta's counters (steps,
  lastStepAt, lastRequestEnd) and its log fold: such a commit names its version and sends
  `counters` and the fold (ARGV[4]) and no meta, and they go to the `counters` hash (fields
  `steps`, `stepAt`, `requestEnd`, `fold`, read over the meta's) in the write that issues the
  version. A commit with a meta writes it whole and drops them (write-meta.lua).

  KEYS (keys.ts SESSION_KEY_ORDER):
    1 meta  2 log  3 queue  4 keys  5 sites  6 calls  7 steps  8 requests  9 counters  10 prompts
    11 (only with an outbox) the session's row outbox stream: each row committed (or each
       named by `outbox`) is also XADDed there (field `row`, and `request` the requestId when
       there is one), in this same write (redis-row-outbox.ts)
  ARGV[1]: JSON object (session-scripts.ts CommitStepArgs); an absent field is nil:
    ttlMs       number: the retention (expire-session.lua)
    logLength   number: the log length the pass was computed on
    version     string: the session version the pass was computed on; absent for none
    stepId      string
    requestId   string, or absent
    counters    {steps, stepAt, requestEnd}: the meta's steps, lastStepAt and lastRequestEnd,
                decimal strings (used when ARGV[3] is '', with ARGV[4])
    prompt      {id, text}: the step's system prompt; `text` absent when `counters` field
                `prompt` is `id`; absent for none
    nonce       string: a random nonce for the next version (never the same twice); absent
                for the server's time
    drain       string[]: ids of the queued items these rows deliver; or, when they are the
                whole queue of the state at `version` (which then names one), their number
    outbox      number[]: the ARGV indexes of the rows KEYS[11] takes; absent: every row
  ARGV[2]: the StepRecord JSON as stored (with `systemRef` prompt.id when there is a prompt)
  ARGV[3]: the SessionMeta JSON; '' when only its counters change (then `version` names a
           version and `counters` is there)
  ARGV[4]: with ARGV[3] '', the meta's logFold JSON ('' for none: the field is left as it is);
           else ''
  ARGV[5..]: the LogEntry JSON rows, in log order
  ARGV[2..] are stored verbatim: their bytes are never decoded or encoded again (packed, they
  would be, twice)
  Returns:
    {v}          committed: the session's version after this write
    <string>     duplicate: the requestId is committed; the StepRecord JSON of that step (nothing written)
    -1           session not found (nothing written)
    -5           the log length is not `logLength`, or the version is not `version`, or
                 `version` names no version while ARGV[3] is '' or `drain` is a number
                 (nothing written)
    -6           a drained item is no longer queued (nothing written)
    -9           the prompt `prompt.id` is not the session's and its text was not sent (nothing written)
]]
--- @include "includes/session-version"
--- @include "includes/expire-session"
--- @include "includes/queue-element"
--- @include "includes/write-meta"

local args = cjson.decode(ARGV[1])

local function commit()
  local requestId = args.requestId
  if requestId then
    local known = redis.call('HGET', KEYS[8], requestId)
    if known then
      local step = redis.call('HGET', KEYS[7], known)
      if step then
        return step
      end
    end
  end

  -- The version is read once: checked here, and the next one follows it.
  local counters = redis.call('HMGET', KEYS[9], 'version', 'prompt')
  local current = counters[1] or ''
  local expected = args.version
  if expected and current ~= expected then
    return -5
  end
  -- A version is only ever written with the meta (create-session.lua) and no script deletes a
  -- meta, so a non-empty version that matches proves the session exists.
  local versioned = expected ~= nil and expected ~= ''
  if not versioned and redis.call('EXISTS', KEYS[1]) == 0 then
    return -1
  end

  local countersOnly = ARGV[3] == ''
  if countersOnly and not versioned then
    return -5
  end
  local prompt = args.prompt
  if prompt and prompt.text == nil and counters[2] ~= prompt.id then
    return -9
  end

  local drain = args.drain
  local wholeQueue = type(drain) == 'number'
  local nDrain = wholeQueue and drain or #drain
  if wholeQueue and not versioned then
    return -5
  end

  -- removeDrained(): the drain's write, chosen by the checks below.
  local removeDrained
  -- With the version current, the queue is the one the pass read, and a pass drains a run
  -- of it in order: when its first and last ids are the queue's first and n-th elements,
  -- the drain is the queue's head (a step delivers the whole queue), and the elements in
  -- between need not be fetched.
  local isHead = expected ~= nil
  if wholeQueue then
    -- The version proves the queue is the one the pass read, all of which it drains.
    isHead = true
  elseif isHead and nDrain > 0 then
    local first = redis.call('LINDEX', KEYS[3], 0)
    isHead = first and endsWithItemId(first, drain[1])
    if isHead and nDrain > 1 then
      local last = redis.call('LINDEX', KEYS[3], nDrain - 1)
      isHead = last and endsWithItemId(last, drain[nDrain])
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
    if redis.call('LLEN', KEYS[2]) ~= args.logLength then
      return -5
    end
    local byId = {}
    for _, element in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do
      local id = itemIdOf(element)
      if id then
        byId[id] = element
      end
    end
    for _, id in ipairs(drain) do
      if not byId[id] then
        return -6
      end
    end
    removeDrained = function()
      for _, id in ipairs(drain) do
        local element = byId[id]
        if element then
          redis.call('LREM', KEYS[3], 1, element)
          byId[id] = nil
        end
      end
    end
  end

  -- Validated: write from here on.
  -- RPUSH in chunks: unpack() is bounded by the Lua C stack.
  local CHUNK = 1000
  for from = 5, #ARGV, CHUNK do
    redis.call('RPUSH', KEYS[2], unpack(ARGV, from, math.min(from + CHUNK - 1, #ARGV)))
  end
  removeDrained()
  if KEYS[11] then
    local taken = args.outbox
    if taken == nil then
      taken = {}
      for j = 5, #ARGV do
        taken[#taken + 1] = j
      end
    end
    for _, j in ipairs(taken) do
      if requestId then
        redis.call('XADD', KEYS[11], '*', 'row', ARGV[j], 'request', requestId)
      else
        redis.call('XADD', KEYS[11], '*', 'row', ARGV[j])
      end
    end
  end
  redis.call('HSET', KEYS[7], args.stepId, ARGV[2])
  if requestId then
    redis.call('HSET', KEYS[8], requestId, args.stepId)
  end
  -- `counters` fields written with the version, in the same call.
  local fields = {}
  if countersOnly then
    local c = args.counters
    fields = { 'steps', c.steps, 'stepAt', c.stepAt, 'requestEnd', c.requestEnd }
    if ARGV[4] ~= '' then
      fields[#fields + 1] = 'fold'
      fields[#fields + 1] = ARGV[4]
    end
  else
    writeMeta(ARGV[3])
  end
  if prompt and prompt.text then
    redis.call('HSET', KEYS[10], prompt.id, prompt.text)
    fields[#fields + 1] = 'prompt'
    fields[#fields + 1] = prompt.id
  end
  if args.nonce == nil then
    return { (versionAfter(current, unpack(fields))) }
  end
  return { (versionWith(current, args.nonce, unpack(fields))) }
end

return expireSession(args.ttlMs, commit())
