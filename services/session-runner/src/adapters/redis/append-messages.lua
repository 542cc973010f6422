--[[
  Appends messages at the end of the log, each given its seq (its index), and optionally
  replaces the meta, in one write.

  KEYS (keys.ts SESSION_KEY_ORDER):
    1 meta  2 log  3 queue  4 keys  5 sites  6 calls  7 steps  8 requests  9 counters  10 prompts
  ARGV[1]: JSON object (session-scripts.ts appendMessagesArgs):
    ttlMs     number: the retention (expire-session.lua)
    version   string: the session version the messages were validated on; absent for none
    calls     {id, call}[]: call records written with the messages, as put-call.lua writes them
              (call: the CallRecord JSON); absent for none
    callsKept, trimEvery  numbers: the call records' retention (put-call.lua)
  ARGV[2]: the SessionMeta JSON to write; '' keeps the meta
  ARGV[3..]: the MessageEntry JSON objects without seq, in order, stored with their seq
  appended and otherwise verbatim (packed, they would be decoded and escaped again)
  Returns:
    {n, v, p}  appended: the first message has seq n, the next n+1, ...;
               v is the session's version after this write, p the one before ('' for none)
    -1      session not found (nothing written)
    -7      the version is not `version` (nothing written)
]]
--- @include "includes/session-version"
--- @include "includes/expire-session"
--- @include "includes/write-meta"
--- @include "includes/put-call-record"

local args = cjson.decode(ARGV[1])

local function append()
  if redis.call('EXISTS', KEYS[1]) == 0 then
    return -1
  end
  local prev = redis.call('HGET', KEYS[9], 'version') or ''
  if args.version and prev ~= args.version then
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
  if ARGV[2] ~= '' then
    writeMeta(ARGV[2])
  end
  for _, record in ipairs(args.calls or {}) do
    putCallRecord(record.id, record.call, args.callsKept, args.trimEvery)
  end
  local version = versionAfter(prev)
  return { start, version, prev }
end

return expireSession(args.ttlMs, append())
