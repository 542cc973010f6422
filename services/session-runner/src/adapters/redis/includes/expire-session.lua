--[[
  Included by every session script that writes: its reply goes through
  expireSession(ttlMs, reply), `ttlMs` being the retention of its packed argument (0: kept
  until deleted).

  expireSession(ttlMs, reply): unless the reply is a refusal (a negative integer: nothing
  was written) or ttlMs is 0, gives every session key (KEYS[1..10]) that exists a TTL of
  ttlMs: every write refreshes all of a session's keys together, so a session idle for the
  retention expires whole. Returns `reply`.
]]
local function expireSession(ttlMs, reply)
  local ttl = tonumber(ttlMs) or 0
  if ttl > 0 and not (type(reply) == 'number' and reply < 0) then
    for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], ttl) end
  end
  return reply
end
