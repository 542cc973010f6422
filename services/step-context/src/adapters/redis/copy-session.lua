-- Makes a branch's batch stream: the target session gets the source's entries
-- with the same cursors, its dedupe ids, staleness marks and per-session
-- offsets; entries the target already had that the source lacks are kept,
-- appended after the source's last cursor. Safe to repeat.
-- Needs the append-entry.lua prelude. Touches only the target's keys (one
-- hash tag); the source is read beforehand in one MULTI (redis-batch-store.ts).
--
-- KEYS[1..5]: the target's stream, seq, ids, marks, offsets (its own offsets are kept, merged by max)
-- ARGV[1]: the source snapshot, JSON:
--   { "seq": "<n>" or "", "entries": [["<cursor>-0", [field, value, ...]], ...],
--     "ids": [id, ...], "marks": [key, value, ...], "offsets": [field, offset, ...] }
-- ARGV[2]: retention in ms (decimal; 0 none): the target's five keys get it
-- Returns: how many of the target's own entries were appended after the source's.

local snapshot = cjson.decode(ARGV[1])

local function fields_of(list)
  local map = {}
  for i = 1, #list, 2 do map[list[i]] = list[i + 1] end
  return map
end

local function offset_above(offset, stored)
  if #offset ~= #stored then return #offset > #stored end
  return offset > stored
end

local own = redis.call('XRANGE', KEYS[1], '-', '+')

redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
for _, entry in ipairs(snapshot.entries) do
  redis.call('XADD', KEYS[1], entry[1], unpack(entry[2]))
end
if snapshot.seq ~= '' then redis.call('SET', KEYS[2], snapshot.seq) end
for _, id in ipairs(snapshot.ids) do redis.call('SADD', KEYS[3], id) end
for i = 1, #snapshot.marks, 2 do redis.call('HSET', KEYS[4], snapshot.marks[i], snapshot.marks[i + 1]) end
for i = 1, #snapshot.offsets, 2 do
  local field, offset = snapshot.offsets[i], snapshot.offsets[i + 1]
  local stored = redis.call('HGET', KEYS[5], field)
  if not stored or offset_above(offset, stored) then redis.call('HSET', KEYS[5], field, offset) end
end

local kept = 0
for _, entry in ipairs(own) do
  local f = fields_of(entry[2])
  local result = append_entry(KEYS[1], KEYS[2], KEYS[3], KEYS[4], f.id, f.key, f.version, f.at, f.update, f.trace)
  if result > 0 then kept = kept + 1 end
end
local ttl = tonumber(ARGV[2]) or 0
if ttl > 0 then
  for i = 1, 5 do redis.call('PEXPIRE', KEYS[i], ttl) end
end
return kept
