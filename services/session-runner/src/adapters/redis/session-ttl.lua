--[[
  Prepended to every session script after next-version.lua (redis-session-store.ts), which
  runs the script's own text as script() and returns expireSession(script()).

  ARGV[1] of every session script is the retention in ms (decimal; 0: kept until deleted),
  sent BEFORE the ARGV the script's header lists. It is taken off ARGV here, so each script
  reads its ARGV exactly as its header says.

  expireSession(reply): unless the reply is a refusal (a negative integer: nothing was
  written) or the retention is 0, gives every session key (KEYS[1..10]) that exists a TTL
  of the retention: every write refreshes all of a session's keys together, so a session
  idle for the retention expires whole. Returns `reply`.
]]
local SESSION_TTL_MS = tonumber(table.remove(ARGV, 1)) or 0
local function expireSession(reply)
  if SESSION_TTL_MS > 0 and not (type(reply) == 'number' and reply < 0) then
    for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], SESSION_TTL_MS) end
  end
  return reply
end
