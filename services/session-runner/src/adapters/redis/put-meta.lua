--[[
  Replaces the session meta (thread context edits) when the session exists.

  KEYS (keys.ts SESSION_KEY_ORDER):
    1 meta  2 log  3 queue  4 keys  5 sites  6 calls  7 steps  8 requests  9 counters  10 prompts
  ARGV:
    1 SessionMeta JSON
  Returns:
    <string>  replaced: the session's version after this write
    -1  session not found (nothing written)
]]
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
redis.call('SET', KEYS[1], ARGV[1])
-- The meta is whole again: counters a step commit wrote apart (commit-step.lua) no longer apply.
redis.call('HDEL', KEYS[9], 'steps', 'stepAt', 'requestEnd')
return (nextVersion())
