--[[
  Reads the fingerprint an app request key was recorded with (R13), only while the
  session exists (its meta). Writes nothing.

  KEYS:
    1 the session's meta  2 the session's keys hash (keys.ts)
  ARGV[1]: JSON object (session-scripts.ts keyFingerprint):
    key  string: the app key
  Returns:
    <string>  the fingerprint
    nil       the session or the key is unknown
]]
local args = cjson.decode(ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
  return false
end
local known = redis.call('HGET', KEYS[2], args.key)
if not known then
  return false
end
-- `<n> <fingerprint>` (enqueue.lua), or the fingerprint alone in a record written before.
return string.match(known, '^%d+ (.+)$') or known
