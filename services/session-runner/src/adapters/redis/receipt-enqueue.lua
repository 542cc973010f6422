--[[
  Adds receipts to the receipt queue, due now, once per id: an id queued, dead-lettered or
  in the sent set (ids sent within the keep time) is not added again. Forgets sent ids older
  than the keep time first.

  KEYS: 1 due (zset id -> due ms)  2 receipts (hash id -> receipt JSON)
        3 states (hash id -> state JSON)  4 dead (zset id -> ms)  5 sent (zset id -> ms)
  ARGV: 1 the keep time of sent ids in ms, then pairs: a receipt id, its receipt JSON
  Returns: how many receipts were added
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now - tonumber(ARGV[1]))
local added = 0
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  if redis.call('HEXISTS', KEYS[2], id) == 0 and not redis.call('ZSCORE', KEYS[5], id) then
    redis.call('HSET', KEYS[2], id, ARGV[i + 1])
    redis.call('HSET', KEYS[3], id, '{"attempts":0}')
    redis.call('ZADD', KEYS[1], now, id)
    added = added + 1
  end
end
return added
