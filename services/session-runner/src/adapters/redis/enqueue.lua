--[[
  Queues items with the dedupe check and its record in the same atomic write (R13, R10, R15).
  Item ids are `itm_<n>`, n from the session's `item` counter: unique and increasing.

  KEYS (keys.ts SESSION_KEY_ORDER):
    1 meta  2 log  3 queue  4 keys  5 sites  6 calls  7 steps  8 requests  9 counters  10 prompts
  ARGV[1]: JSON object (session-scripts.ts enqueueArgs):
    ttlMs   number: the retention (expire-session.lua)
    dedupe  {key, fingerprint}: an app request key and the items' fingerprint (R13); or
            {site}: `<callId>|<site>` of the call site that records them (R10, R15); absent: none
    keysKept   number: the app request keys a session keeps (request-retention.ts)
    trimEvery  number: every this many keys recorded, those past the newest keysKept are deleted
  A key's record is `<n> <fingerprint>`, n from the session's `key` counter (a record written
  before retention holds the fingerprint alone, and is the first to go).
  ARGV[2..]: the NewQueuedItem JSON objects (without itemId), in queue order, stored with their
  id appended and otherwise verbatim (packed, they would be decoded and escaped again)
  Returns:
    {n, v, p}  recorded: the items got ids itm_(n-k+1) .. itm_n, k = number of items;
               v is the session's version after this write, p the one before ('' for none)
    -1      session not found (nothing written)
    -3      replayed: the same key with the same fingerprint, or a site that recorded (nothing written)
    -4      key conflict: the key was used with another fingerprint (nothing written)
]]
--- @include "includes/session-version"
--- @include "includes/expire-session"
--- @include "includes/queue-element"
--- @include "includes/trim-oldest"

local args = cjson.decode(ARGV[1])

local function enqueue()
  if redis.call('EXISTS', KEYS[1]) == 0 then
    return -1
  end

  local dedupe = args.dedupe
  if dedupe and dedupe.key then
    local known = redis.call('HGET', KEYS[4], dedupe.key)
    if known then
      if (string.match(known, '^%d+ (.+)$') or known) == dedupe.fingerprint then
        return -3
      end
      return -4
    end
  elseif dedupe and dedupe.site then
    if redis.call('SISMEMBER', KEYS[5], dedupe.site) == 1 then
      return -3
    end
  end

  -- Validated: write from here on.
  if dedupe and dedupe.key then
    local n = redis.call('HINCRBY', KEYS[9], 'key', 1)
    redis.call('HSET', KEYS[4], dedupe.key, n .. ' ' .. dedupe.fingerprint)
    if n % args.trimEvery == 0 then
      trimOldest(KEYS[4], args.keysKept)
    end
  elseif dedupe and dedupe.site then
    redis.call('SADD', KEYS[5], dedupe.site)
  end

  local k = #ARGV - 1
  local last = redis.call('HINCRBY', KEYS[9], 'item', k)
  for j = 1, k do
    redis.call('RPUSH', KEYS[3], withItemId(ARGV[j + 1], 'itm_' .. (last - k + j)))
  end
  local version, prev = nextVersion()
  return { last, version, prev }
end

return expireSession(args.ttlMs, enqueue())
