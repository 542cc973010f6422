--[[
  Gives up the lease of a row-outbox shard if this relay holds it.

  KEYS: 1 the shard's lease (keys.ts outboxLease)
  ARGV: 1 the relay's owner id
  Returns: 1 released; 0 not held by ARGV[1]
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
