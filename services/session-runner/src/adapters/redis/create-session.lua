--[[
  Creates a session with an initial log, steps, calls and call sites (a branch copies them);
  never a queue. The item counter starts at the source's, so item ids never collide.

  KEYS (all under the session's hash tag, in keys.ts SESSION_KEY_ORDER):
    1 meta  2 log  3 queue  4 keys  5 sites  6 calls  7 steps  8 requests  9 counters  10 prompts
  ARGV:
    1 SessionMeta JSON
    2 nLog    3 nSteps    4 nCalls    5 nSites    6 itemSeq (the last item number already used)
    7 nPrompts
    then nLog LogEntry JSONs, in log order;
    then nSteps triples: stepId, requestId ('' for none), StepRecord JSON;
    then nCalls pairs: callId, CallRecord JSON (their order is the calls' order);
    then nSites call-site strings;
    then nPrompts pairs: prompt id, system prompt text (the prompts the steps name).
  Returns:
    <string>  created: the session's version
    -2  the session exists (nothing written)
]]
if redis.call('EXISTS', KEYS[1]) == 1 then
  return -2
end

local nLog = tonumber(ARGV[2])
local nSteps = tonumber(ARGV[3])
local nCalls = tonumber(ARGV[4])
local nSites = tonumber(ARGV[5])
local itemSeq = tonumber(ARGV[6])
local nPrompts = tonumber(ARGV[7])

-- Keys without a meta are leftovers of nothing valid: start clean.
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10])

local i = 8
-- RPUSH in chunks: unpack() is bounded by the Lua C stack.
local CHUNK = 1000
local from = i
local last = i + nLog - 1
while from <= last do
  local to = math.min(from + CHUNK - 1, last)
  redis.call('RPUSH', KEYS[2], unpack(ARGV, from, to))
  from = to + 1
end
i = i + nLog

for _ = 1, nSteps do
  local stepId, requestId, step = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  redis.call('HSET', KEYS[7], stepId, step)
  if requestId ~= '' then
    redis.call('HSET', KEYS[8], requestId, stepId)
  end
  i = i + 3
end

for order = 1, nCalls do
  redis.call('HSET', KEYS[6], ARGV[i], order .. ' ' .. ARGV[i + 1])
  i = i + 2
end
if nCalls > 0 then
  redis.call('HSET', KEYS[9], 'call', nCalls)
end

for _ = 1, nSites do
  redis.call('SADD', KEYS[5], ARGV[i])
  i = i + 1
end
if itemSeq > 0 then
  redis.call('HSET', KEYS[9], 'item', itemSeq)
end
if nPrompts > 0 then
  redis.call('HSET', KEYS[10], unpack(ARGV, i, i + 2 * nPrompts - 1))
end

redis.call('SET', KEYS[1], ARGV[1])
return (nextVersion())
