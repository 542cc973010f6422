--[[
  Takes or renews the lease of a row-outbox shard: a relay reads and publishes a shard's
  entries only while it holds the lease.

  KEYS: 1 the shard's lease (keys.ts outboxLease)
  ARGV: 1 the relay's owner id  2 the lease in ms
  Returns: 1 held by ARGV[1] now; 0 another relay holds it
]]
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
