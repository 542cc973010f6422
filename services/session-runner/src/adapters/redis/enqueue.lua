--[[
  Queues items with the dedupe check and its record in the same atomic write (R13, R10, R15).
  Item ids are `itm_<n>`, n from the session's `item` counter: unique and increasing.

  KEYS (keys.ts SESSION_KEY_ORDER):
    1 meta  2 log  3 queue  4 keys  5 sites  6 calls  7 steps  8 requests  9 counters  10 prompts
  ARGV:
    1 dedupe: 'none' | 'key' | 'site'
    2 the app key ('key') or `<callId>|<site>` ('site'); '' for 'none'
    3 the items' fingerprint ('key'); '' otherwise
    4.. NewQueuedItem JSON objects (without itemId), in queue order
  Returns:
    {n, v, p}  recorded: the items got ids itm_(n-k+1) .. itm_n, k = number of items;
               v is the session's version after this write, p the one before ('' for none)
    -1      session not found (nothing written)
    -3      replayed: the same key with the same fingerprint, or a site that recorded (nothing written)
    -4      key conflict: the key was used with another fingerprint (nothing written)
]]
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end

local mode = ARGV[1]
if mode == 'key' then
  local known = redis.call('HGET', KEYS[4], ARGV[2])
  if known then
    if known == ARGV[3] then
      return -3
    end
    return -4
  end
elseif mode == 'site' then
  if redis.call('SISMEMBER', KEYS[5], ARGV[2]) == 1 then
    return -3
  end
end

-- Validated: write from here on.
if mode == 'key' then
  redis.call('HSET', KEYS[4], ARGV[2], ARGV[3])
elseif mode == 'site' then
  redis.call('SADD', KEYS[5], ARGV[2])
end

local k = #ARGV - 3
local last = redis.call('HINCRBY', KEYS[9], 'item', k)
for j = 1, k do
  local item = ARGV[3 + j]
  local field = '"itemId":"itm_' .. (last - k + j) .. '"'
  -- itemId is spliced in as the LAST property: the scripts find it at the end of the element.
  if item == '{}' then
    item = '{' .. field .. '}'
  else
    item = string.sub(item, 1, -2) .. ',' .. field .. '}'
  end
  redis.call('RPUSH', KEYS[3], item)
end
local version, prev = nextVersion()
return { last, version, prev }
