-- Appends a run of ticket updates (the records of ONE bus partition, in offset
-- order) to the batch streams of their sessions and records the last consumed
-- offset, in ONE atomic step (exactly-once from the bus). Needs the
-- append-entry.lua prelude.
--
-- KEYS[1]: the offsets hash: stepContextKeys(prefix).offsets on a single Redis,
--          or the session's own `.session(id).offsets` on Redis Cluster (one session per call)
-- KEYS[2..]: five per session, in order: stream, seq, ids, marks, subscriptions
-- ARGV[1]: offsets field `<topic>:<partition>`, or '' for plain appends (no offset read or written)
-- ARGV[2]: retention in ms (decimal; 0 none): each session appended to gets it on its five keys
-- ARGV[3]: '1': append only to sessions whose subscriptions set is not empty (an erased or
--          unsubscribed session gets -3 and nothing is written for it); '': no check
-- ARGV[4]: '1' when KEYS[1] is the session's own offsets hash (Redis Cluster): it gets the
--          retention, and is not written when the session was refused by ARGV[3]; '' otherwise
-- ARGV[5..]: eight per record, in offset order:
--   offset: canonical decimal string (no leading zeros), strictly increasing; '' with ARGV[1] ''
--   id: update id, or '' for a record with nothing to apply (a poison record: only its offset counts)
--   key: ticket key `<source>:<ticket>`
--   version: decimal string or ''
--   at: occurredAt in epoch ms (decimal) or ''
--   update: the update, JSON
--   trace: W3C traceparent stored with each new entry (field `trace`), or '' (none)
--   sessions: the 1-based indexes of its sessions in KEYS order, space separated ('' none)
-- Offset check: a record at or below the stored offset was consumed before and
-- is skipped (nothing written for it); offsets increase, so what is skipped is a
-- prefix of the run. The field is then set to the offset of the last record,
-- unless every record was skipped.
-- Returns: a flat table, per record in order: -1 when skipped; otherwise 1
--   followed by one code per listed session, in the listed order: the new
--   cursor (> 0), 0 duplicate, -2 stale (see append_entry), -3 not subscribed (ARGV[3]).
-- Errors (before any write): a malformed argument list or a session index out of range.

-- Offsets exceed 2^53: compare canonical decimal strings, never as Lua numbers.
local function offset_above(offset, stored)
  if #offset ~= #stored then return #offset > #stored end
  return offset > stored
end

local field = ARGV[1]
local ttl = tonumber(ARGV[2]) or 0
local subscribed_only = ARGV[3] == '1'
local own_offsets = ARGV[4] == '1'
local FIRST = 5
local sessions = (#KEYS - 1) / 5
if (#ARGV - FIRST + 1) % 8 ~= 0 or sessions ~= math.floor(sessions) then
  return redis.error_reply('apply-batch: malformed arguments')
end

-- Validate every session list before the first write (a script is never rolled back).
local lists = {}
for base = FIRST, #ARGV, 8 do
  local list = {}
  for index in string.gmatch(ARGV[base + 7], '%d+') do
    local i = tonumber(index)
    if i < 1 or i > sessions then return redis.error_reply('apply-batch: session index out of range') end
    list[#list + 1] = i
  end
  lists[#lists + 1] = list
end

local stored = false
if field ~= '' then stored = redis.call('HGET', KEYS[1], field) end

-- Per session: true once checked and allowed (ARGV[3]), false when refused.
local allowed = {}
local function may_append(i)
  if allowed[i] == nil then
    allowed[i] = not subscribed_only or redis.call('SCARD', KEYS[2 + (i - 1) * 5 + 4]) > 0
  end
  return allowed[i]
end

local results = {}
local last = false
local record = 0
local refused = false
for base = FIRST, #ARGV, 8 do
  record = record + 1
  local offset = ARGV[base]
  if stored and not offset_above(offset, stored) then
    results[#results + 1] = -1
  else
    results[#results + 1] = 1
    last = offset
    local id = ARGV[base + 1]
    if id ~= '' then
      for _, i in ipairs(lists[record]) do
        local k = 2 + (i - 1) * 5
        if may_append(i) then
          results[#results + 1] = append_entry(KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], id, ARGV[base + 2],
            ARGV[base + 3], ARGV[base + 4], ARGV[base + 5], ARGV[base + 6])
        else
          results[#results + 1] = -3
          refused = true
        end
      end
    end
  end
end

if field ~= '' and last and not (own_offsets and refused) then redis.call('HSET', KEYS[1], field, last) end
if ttl > 0 then
  for i, ok in pairs(allowed) do
    if ok then
      local k = 2 + (i - 1) * 5
      for j = k, k + 4 do redis.call('PEXPIRE', KEYS[j], ttl) end
    end
  end
  if own_offsets then redis.call('PEXPIRE', KEYS[1], ttl) end
end
return results
