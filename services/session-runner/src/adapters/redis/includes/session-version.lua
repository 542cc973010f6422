--[[
  Included by every session script that writes: the session's version, in KEYS[9] (the
  `counters` hash, field `version`). A version is the write count, then the server's time
  (or a random nonce from the client), so no version is issued twice, even after a restart
  lost the last writes: a runner that holds a session's state of version v holds the
  current state exactly while the store has v.

  versionWith(prev, suffix, ...): writes the version after `prev` ('' for none) whose second
  part is `suffix`; `...`: more `counters` fields and values, written in the same HSET.
  versionAfter(prev, ...): the same with the server's time as the second part.
  nextVersion(): versionAfter() of the version stored now.
  Each returns the new version and the previous one.
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
