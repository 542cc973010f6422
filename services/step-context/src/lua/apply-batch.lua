-- Appends one ticket update to the batch streams of one or more sessions and
-- records the consumed bus offset, in ONE atomic step (exactly-once from the bus).
-- Needs the append-entry.lua prelude.
--
-- KEYS[1]: the offsets hash: stepContextKeys(prefix).offsets on a single Redis,
--          or the session's own `.session(id).offsets` on Redis Cluster (one session per call)
-- KEYS[2..]: four per session, in order: stream, seq, ids, marks
-- ARGV[1]: offsets field `<topic>:<partition>`, or '' for a plain append (no offset read or written)
-- ARGV[2]: the offset, canonical decimal string (no leading zeros); '' with ARGV[1] ''
-- ARGV[3]: update id
-- ARGV[4]: ticket key `<source>:<ticket>`
-- ARGV[5]: version (decimal) or ''
-- ARGV[6]: occurredAt in epoch ms (decimal) or ''
-- ARGV[7]: the update, JSON
-- ARGV[8]: W3C traceparent stored with each new entry (field `trace`), or '' (none)
-- Returns: -1 when the offset is at or below the stored one (nothing written);
--   otherwise a table with one integer per session, in KEYS order:
--   the new cursor (> 0), 0 duplicate, -2 stale (see append_entry).

-- Offsets exceed 2^53: compare canonical decimal strings, never as Lua numbers.
local function offset_above(offset, stored)
  if #offset ~= #stored then return #offset > #stored end
  return offset > stored
end

local field, offset = ARGV[1], ARGV[2]
if field ~= '' then
  local stored = redis.call('HGET', KEYS[1], field)
  if stored and not offset_above(offset, stored) then return -1 end
end

local results = {}
local sessions = (#KEYS - 1) / 4
for i = 0, sessions - 1 do
  local k = 2 + i * 4
  results[#results + 1] =
    append_entry(KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8])
end

if field ~= '' then redis.call('HSET', KEYS[1], field, offset) end
return results
