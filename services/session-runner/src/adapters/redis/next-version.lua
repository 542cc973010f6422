--[[
  Prepended to every session script (redis-session-store.ts): nextVersion() writes the
  session's next version into KEYS[9] (`seq`, field `version`) and returns it with the
  previous one ('' for none). A version is the write count, then the server's time, so no
  version is issued twice, even after a restart lost the last writes: a runner that holds
  a session's state of version v holds the current state exactly while the store has v.
  versionAfter(prev, ...) is the same for a script that has read the current version
  already; `...`: more `seq` fields and values, written in the same call. versionWith(prev,
  nonce, ...) puts a random nonce from the client where the time goes (no TIME call).
]]
local function versionWith(prev, suffix, ...)
  local version = ((tonumber(string.match(prev, '^(%d+)')) or 0) + 1) .. '.' .. suffix
  redis.call('HSET', KEYS[9], 'version', version, ...)
  return version, prev
end
local function versionAfter(prev, ...)
  local t = redis.call('TIME')
  return versionWith(prev, t[1] .. string.format('%06d', t[2]), ...)
end
local function nextVersion()
  return versionAfter(redis.call('HGET', KEYS[9], 'version') or '')
end
