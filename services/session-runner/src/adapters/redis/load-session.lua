--[[
  Reads a session: its whole log, or its log window (the log from the meta's logFold.at on,
  the `counters` field `fold` over the meta's; the whole log when there is no fold, or one
  past the log's end). One script: a
  consistent snapshot of the session. Writes nothing.

  KEYS (keys.ts SESSION_KEY_ORDER):
    1 meta  2 log  3 queue  4 keys  5 sites  6 calls  7 steps  8 requests  9 counters  10 prompts
  ARGV[1]: JSON object (session-scripts.ts loadSession):
    window  true for the log window; absent for the whole log
    fields  string[]: the fields of `counters` to read
  Returns:
    {meta, from, log, queue, calls, sites, counters, requests}: the meta JSON, the seq of the
    first log element returned, the log from it, the queue, the calls hash as a flat list of
    fields and values, the sites, the values of the `counters` fields asked for (nil when
    absent), the request ids
    nil  the session does not exist
]]
local args = cjson.decode(ARGV[1])
local meta = redis.call('GET', KEYS[1])
if not meta then
  return false
end
local from = 0
if args.window then
  -- A step commit that changed only the counters wrote the fold beside them (commit-step.lua).
  local fold = redis.call('HGET', KEYS[9], 'fold')
  local ok, decoded
  if fold then
    ok, decoded = pcall(cjson.decode, fold)
  else
    ok, decoded = pcall(cjson.decode, meta)
    decoded = ok and type(decoded) == 'table' and decoded.logFold or nil
  end
  if ok and type(decoded) == 'table' then
    local at = tonumber(decoded.at)
    if at and at > 0 and at <= redis.call('LLEN', KEYS[2]) then
      from = at
    end
  end
end
return {
  meta,
  from,
  redis.call('LRANGE', KEYS[2], from, -1),
  redis.call('LRANGE', KEYS[3], 0, -1),
  redis.call('HGETALL', KEYS[6]),
  redis.call('SMEMBERS', KEYS[5]),
  redis.call('HMGET', KEYS[9], unpack(args.fields)),
  redis.call('HKEYS', KEYS[8]),
}
