--[[
  Removes outbox entries whose events were published. An outbox left empty is kept (it
  expires with the session): a stream's ids only grow while it exists, so a ref removed
  once never comes back as another entry's (the relay removes a committed batch's refs
  again after a takeover, redis-row-outbox.ts).

  KEYS: 1 the session's outbox stream (keys.ts outbox)
  ARGV: the stream ids of the entries
  Returns: the entries left in the stream
]]
redis.call('XDEL', KEYS[1], unpack(ARGV))
return redis.call('XLEN', KEYS[1])
