--[[
  Creates a session with an initial log, steps, calls and call sites (a branch copies them);
  never a queue. The item counter starts at the source's, so item ids never collide.

  KEYS (all under the session's hash tag, in keys.ts SESSION_KEY_ORDER):
    1 meta  2 log  3 queue  4 keys  5 sites  6 calls  7 steps  8 requests  9 counters  10 prompts
  ARGV[1]: JSON object (session-scripts.ts createSessionArgs):
    ttlMs    number: the retention (expire-session.lua)
    meta     string: the SessionMeta JSON
    steps    {id, requestId, step}[]: step id, request id (absent for none), StepRecord JSON as stored
    calls    {id, call}[]: call id, CallRecord JSON; their order is the calls' order
    sites    string[]: call-site strings
    itemSeq  number: the last item number already used (0: none)
    prompts  {id, text}[]: the prompts the steps name
  ARGV[2..]: the LogEntry JSONs of the log, in log order, verbatim (as commit-step.lua's rows)
  Returns:
    <string>  created: the session's version
    -2  the session exists (nothing written)
]]
--- @include "includes/session-version"
--- @include "includes/expire-session"

local args = cjson.decode(ARGV[1])

local function create()
  if redis.call('EXISTS', KEYS[1]) == 1 then
    return -2
  end

  -- Keys without a meta are leftovers of nothing valid: start clean.
  redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10])

  -- RPUSH in chunks: unpack() is bounded by the Lua C stack.
  local CHUNK = 1000
  for from = 2, #ARGV, CHUNK do
    redis.call('RPUSH', KEYS[2], unpack(ARGV, from, math.min(from + CHUNK - 1, #ARGV)))
  end

  for _, step in ipairs(args.steps) do
    redis.call('HSET', KEYS[7], step.id, step.step)
    if step.requestId then
      redis.call('HSET', KEYS[8], step.requestId, step.id)
    end
  end

  for order, call in ipairs(args.calls) do
    redis.call('HSET', KEYS[6], call.id, order .. ' ' .. call.call)
  end
  if #args.calls > 0 then
    redis.call('HSET', KEYS[9], 'call', #args.calls)
  end

  for _, site in ipairs(args.sites) do
    redis.call('SADD', KEYS[5], site)
  end
  if args.itemSeq > 0 then
    redis.call('HSET', KEYS[9], 'item', args.itemSeq)
  end
  for _, prompt in ipairs(args.prompts) do
    redis.call('HSET', KEYS[10], prompt.id, prompt.text)
  end

  redis.call('SET', KEYS[1], args.meta)
  return (nextVersion())
end

return expireSession(args.ttlMs, create())
