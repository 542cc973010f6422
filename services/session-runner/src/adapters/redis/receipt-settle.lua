--[[
  Settles a taken receipt. `complete`: removed (whoever holds it: it was delivered) and its id
  put in the sent set. `retry`, `release`, `dead`: only while the lease token is still the
  receipt's; `retry` counts a failed attempt and makes it due after the delay, `release` makes
  it due now (a call cut short), `dead` counts the attempt and moves it to the dead set.

  KEYS: as receipt-enqueue.lua
  ARGV: 1 complete|retry|release|dead  2 the receipt id  3 the lease token
        4 retry: the delay in ms; complete: the keep time of sent ids in ms  5 the error
  Returns: 1 settled; 0 the lease was lost (or the receipt is gone)
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local op, id = ARGV[1], ARGV[2]
if op == 'complete' then
  redis.call('ZREM', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
  redis.call('ZREM', KEYS[4], id)
  redis.call('ZADD', KEYS[5], now, id)
  redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now - tonumber(ARGV[4]))
  return 1
end
local raw = redis.call('HGET', KEYS[3], id)
if not raw then
  return 0
end
local state = cjson.decode(raw)
if state.lease ~= ARGV[3] or state.deadAt then
  return 0
end
state.lease = nil
if op == 'release' then
  redis.call('ZADD', KEYS[1], now, id)
elseif op == 'retry' then
  state.attempts = state.attempts + 1
  state.error = ARGV[5]
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), id)
else
  state.attempts = state.attempts + 1
  state.error = ARGV[5]
  state.deadAt = now
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZADD', KEYS[4], now, id)
end
redis.call('HSET', KEYS[3], id, cjson.encode(state))
return 1
