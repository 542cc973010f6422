--[[
  The owner of a session, read from the session-runner's record of it.

  KEYS[1]: the session's record (session-directory.ts sessionRecordKey): a JSON object
           whose `tenant` field is the session's owner.
  ARGV: none
  Returns: the tenant (a string), or false when the session does not exist.
  Only the tenant crosses the network, however large the record.
]]
local record = redis.call('GET', KEYS[1])
if not record then
  return false
end
local tenant = cjson.decode(record).tenant
if type(tenant) ~= 'string' then
  return redis.error_reply('ERR the session record ' .. KEYS[1] .. ' names no tenant')
end
return tenant
