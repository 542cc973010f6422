--[[
  Replaces the session meta (thread context edits) when the session exists.

  KEYS (keys.ts SESSION_KEY_ORDER):
    1 meta  2 log  3 queue  4 keys  5 sites  6 calls  7 steps  8 requests  9 counters  10 prompts
  ARGV[1]: JSON object (session-scripts.ts putMetaArgs):
    ttlMs  number: the retention (expire-session.lua)
    meta   string: the SessionMeta JSON
  Returns:
    <string>  replaced: the session's version after this write
    -1  session not found (nothing written)
]]
--- @include "includes/session-version"
--- @include "includes/expire-session"
--- @include "includes/write-meta"

local args = cjson.decode(ARGV[1])

local function put()
  if redis.call('EXISTS', KEYS[1]) == 0 then
    return -1
  end
  writeMeta(args.meta)
  return (nextVersion())
end

return expireSession(args.ttlMs, put())
