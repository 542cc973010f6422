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
--- @include "includes/trim-oldest"

local args = cjson.decode(ARGV[1])

local function put()
  if redis.call('EXISTS', KEYS[1]) == 0 then
    return -1
  end
  local current = redis.call('HGET', KEYS[6], args.callId)
  local order
  if current then
    order = string.match(current, '^(%d+) ')
  end
  local fresh = false
  if not order then
    order = redis.call('HINCRBY', KEYS[9], 'call', 1)
    fresh = true
  end
  redis.call('HSET', KEYS[6], args.callId, order .. ' ' .. args.call)
  if fresh and order % args.trimEvery == 0 then
    local dropped = trimOldest(KEYS[6], args.callsKept)
    if #dropped > 0 then
      local gone = {}
      for _, callId in ipairs(dropped) do
        gone[callId] = true
      end
      local sites = {}
      for _, site in ipairs(redis.call('SMEMBERS', KEYS[5])) do
        local callId = string.match(site, '^(.-)|')
        if callId and gone[callId] then
          sites[#sites + 1] = site
        end
      end
      for i = 1, #sites, 500 do
        redis.call('SREM', KEYS[5], unpack(sites, i, math.min(i + 499, #sites)))
      end
    end
  end
  local version, prev = nextVersion()
  return { version, prev }
end

return expireSession(args.ttlMs, put())
