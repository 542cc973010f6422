--[[
  Takes due receipts under a lease: each is due again only when the lease runs out, so
  another sender does not take it meanwhile.

  KEYS: as receipt-enqueue.lua
  ARGV: 1 most receipts  2 the lease in ms  3 the lease token
  Returns: triples: id, receipt JSON, failed attempts so far
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
local out = {}
for _, id in ipairs(ids) do
  local receipt = redis.call('HGET', KEYS[2], id)
  if not receipt then
    redis.call('ZREM', KEYS[1], id)
  else
    local state = cjson.decode(redis.call('HGET', KEYS[3], id) or '{"attempts":0}')
    state.lease = ARGV[3]
    redis.call('HSET', KEYS[3], id, cjson.encode(state))
    redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), id)
    out[#out + 1] = id
    out[#out + 1] = receipt
    out[#out + 1] = tostring(state.attempts)
  end
end
return out
