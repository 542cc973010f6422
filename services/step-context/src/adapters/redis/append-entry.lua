-- Shared prelude (prepended to apply-batch.lua and copy-session.lua; not a command by itself).
--
-- append_entry(stream, seq, ids, marks, id, key, version, at, update, trace)
--   stream, seq, ids, marks: one session's keys (stepContextKeys(prefix).session(id))
--   id: update id; key: ticket key `<source>:<ticket>`
--   version: decimal string or '' (none); at: occurredAt in epoch ms as a decimal string, or '' (unknown)
--   update: the update as JSON
--   trace: W3C traceparent of the span that applied it, or '' / nil (untraced: no `trace` field)
-- Returns: the new cursor (> 0), 0 when the id was already applied (duplicate),
--   -2 when the session already has a newer update of that ticket (stale).
-- Staleness (batch-store.ts isStale): by version when both the newest appended
-- update and this one carry one, else by occurredAt; equal is not stale.

local function append_entry(stream, seq, ids, marks, id, key, version, at, update, trace)
  if redis.call('SISMEMBER', ids, id) == 1 then
    return 0
  end
  local mark = redis.call('HGET', marks, key)
  local mark_version, mark_at = '', ''
  if mark then
    local sep = string.find(mark, '|', 1, true)
    mark_version = string.sub(mark, 1, sep - 1)
    mark_at = string.sub(mark, sep + 1)
  end
  local v, mv = tonumber(version), tonumber(mark_version)
  local a, ma = tonumber(at), tonumber(mark_at)
  if v and mv then
    if v < mv then return -2 end
  elseif a and ma then
    if a < ma then return -2 end
  end
  local cursor = redis.call('INCR', seq)
  if trace and trace ~= '' then
    redis.call('XADD', stream, cursor .. '-0', 'id', id, 'key', key, 'version', version, 'at', at, 'update', update,
      'trace', trace)
  else
    redis.call('XADD', stream, cursor .. '-0', 'id', id, 'key', key, 'version', version, 'at', at, 'update', update)
  end
  redis.call('SADD', ids, id)
  local next_version = version
  if next_version == '' then next_version = mark_version end
  local next_at = at
  if ma and (not a or ma > a) then next_at = mark_at end
  redis.call('HSET', marks, key, next_version .. '|' .. next_at)
  return cursor
end
