--[[
  Drops a session from the outbox index unless a commit marked it again since the
  relay read its mark (every mark writes a new score).

  KEYS: 1 the outbox index (keys.ts outboxIndex)
  ARGV: 1 the member (`[tenant, sessionId]` JSON)  2 its score as the relay read it
  Returns: 1 dropped; 0 marked again (kept)
]]
if redis.call('ZSCORE', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 1
end
return 0
