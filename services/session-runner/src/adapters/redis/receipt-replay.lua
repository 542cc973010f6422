--[[
  Makes dead-lettered receipts due now, attempts reset: those named, or every one.

  KEYS: as receipt-enqueue.lua
  ARGV: the receipt ids; none: every dead-lettered receipt
  Returns: for each receipt moved: id, receipt JSON, the state JSON it had
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ids = ARGV
if #ids == 0 then
  ids = redis.call('ZRANGE', KEYS[4], 0, -1)
end
local out = {}
for _, id in ipairs(ids) do
  local receipt = redis.call('HGET', KEYS[2], id)
  if redis.call('ZSCORE', KEYS[4], id) and receipt then
    redis.call('ZREM', KEYS[4], id)
    out[#out + 1] = id
    out[#out + 1] = receipt
    out[#out + 1] = redis.call('HGET', KEYS[3], id) or '{"attempts":0}'
    redis.call('HSET', KEYS[3], id, '{"attempts":0}')
    redis.call('ZADD', KEYS[1], now, id)
  end
end
return out
