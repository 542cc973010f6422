--[[
  Appends messages at the end of the log, each given its seq (its index), and optionally
  replaces the meta, in one write.

  KEYS (keys.ts SESSION_KEY_ORDER):
    1 meta  2 log  3 queue  4 keys  5 sites  6 calls  7 steps  8 requests  9 counters  10 prompts
  ARGV:
    1 SessionMeta JSON, or '' to keep the meta
    2 the session version the messages were validated on, or '-' for none
    3.. MessageEntry JSON objects without seq, in order
  Returns:
    {n, v, p}  appended: the first message has seq n, the next n+1, ...;
               v is the session's version after this write, p the one before ('' for none)
    -1      session not found (nothing written)
    -7      the version is not ARGV[2] (nothing written)
]]
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
local prev = redis.call('HGET', KEYS[9], 'version') or ''
if ARGV[2] ~= '-' and prev ~= ARGV[2] then
  return -7
end

local start = redis.call('LLEN', KEYS[2])
for j = 3, #ARGV do
  local message = ARGV[j]
  local field = '"seq":' .. (start + j - 3)
  if message == '{}' then
    message = '{' .. field .. '}'
  else
    message = string.sub(message, 1, -2) .. ',' .. field .. '}'
  end
  redis.call('RPUSH', KEYS[2], message)
end
if ARGV[1] ~= '' then
  redis.call('SET', KEYS[1], ARGV[1])
  -- The meta is whole again: counters a step commit wrote apart (commit-step.lua) no longer apply.
  redis.call('HDEL', KEYS[9], 'steps', 'stepAt', 'requestEnd')
end
local version = versionAfter(prev)
return { start, version, prev }
