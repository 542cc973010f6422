--[[
  Inserts or replaces one call record. A replaced call keeps its place in the calls' order;
  a new one goes last.

  KEYS (keys.ts SESSION_KEY_ORDER):
    1 meta  2 log  3 queue  4 keys  5 sites  6 calls  7 steps  8 requests  9 counters  10 prompts
  ARGV[1]: JSON object (session-scripts.ts putCallArgs):
    ttlMs   number: the retention (expire-session.lua)
    callId  string
    call    string: the CallRecord JSON
    callsKept  number: the call records a session keeps (request-retention.ts)
    trimEvery  number: every this many new calls, the records past the newest callsKept are
               deleted, with every call site of theirs (`<callId>|...` in the sites set)
  Returns:
    {v, p}  stored: the session's version after this write, p the one before ('' for none)
    -1  session not found (nothing written)
]]
--- @include "includes/session-version"
--- @include "includes/expire-session"
--- @include "includes/put-call-record"

local args = cjson.decode(ARGV[1])

local function put()
  if redis.call('EXISTS', KEYS[1]) == 0 then
    return -1
  end
  putCallRecord(args.callId, args.call, args.callsKept, args.trimEvery)
  local version, prev = nextVersion()
  return { version, prev }
end

return expireSession(args.ttlMs, put())
