-- Stores a run of ticket updates (the records of ONE bus partition, in offset
-- order) in the feed streams they belong to and records the last consumed
-- offset, in ONE atomic step (exactly-once from the bus). Each update is stored
-- once per stream that has a live follower, whatever the number of followers.
--
-- KEYS[1]: the offsets hash: stepContextKeys(prefix).offsets on a single Redis,
--          or the source's own `.source(tenant, source).offsets` on Redis Cluster (one source per call)
-- KEYS[2..]: the keys the records' layouts name: per source seq, ids, marks, last (four in a row);
--          per stream its stream (`...:stream:<digest>`) and followers (two in a row)
-- ARGV[1]: offsets field `<topic>:<partition>`, or '' for plain appends (no offset read or written)
-- ARGV[2]: retention in ms (decimal; 0 none): each stream written, the ids and marks get it
-- ARGV[3]: now, epoch ms: a follower whose expiry is below it is gone
-- ARGV[4]: '1' when KEYS[1] is the source's own offsets hash (Redis Cluster): it gets the retention
-- ARGV[5]: '1': write every listed stream (plain appends); '': only streams with a live follower
-- ARGV[6]: the dedupe window: how many of the source's last stored ids are kept
-- ARGV[7..]: eight per record, in offset order:
--   offset: canonical decimal string (no leading zeros), strictly increasing; '' with ARGV[1] ''
--   id: update id, or '' for a record with nothing to apply (a poison record: only its offset counts)
--   key: ticket key `<source>:<ticket>`
--   version: decimal string or ''
--   at: occurredAt in epoch ms (decimal) or ''
--   update: the update, JSON
--   trace: W3C traceparent stored with each new entry (field `trace`), or '' (none)
--   layout: 'k j1 j2 ...': KEYS index of the source's seq, then of each candidate stream ('' with no id)
-- Each entry also gets field `w`, its write order across sources: ARGV[3] then the
-- record's place in the run on three digits (epoch ms x 1000 + place).
-- Offset check: a record at or below the stored offset was consumed before and
-- is skipped (nothing written for it); offsets increase, so what is skipped is a
-- prefix of the run. The field is then set to the offset of the last record,
-- unless every record was skipped.
-- Dedupe and staleness (batch-store.ts isStale) per source, among stored updates:
-- by version when both the newest stored update of the ticket and this one carry
-- one, else by occurredAt; equal is not stale.
-- Returns: a flat table, per record in order: -1 when skipped; otherwise 1, and for
--   a record with an update two more: the new seq (> 0), 0 duplicate, -2 stale,
--   -3 unwatched (no live follower); then how many streams it was stored in.
-- Errors (before any write): a malformed argument list or a key index out of range.

local function offset_above(offset, stored)
  if #offset ~= #stored then return #offset > #stored end
  return offset > stored
end

local field = ARGV[1]
local ttl = tonumber(ARGV[2]) or 0
local now = ARGV[3]
local own_offsets = ARGV[4] == '1'
local all = ARGV[5] == '1'
local window = tonumber(ARGV[6]) or 10000
local FIRST = 7
if (#ARGV - FIRST + 1) % 8 ~= 0 then return redis.error_reply('apply-batch: malformed arguments') end

-- Validate every layout before the first write (a script is never rolled back).
local layouts = {}
for base = FIRST, #ARGV, 8 do
  local layout = {}
  for index in string.gmatch(ARGV[base + 7], '%d+') do
    local i = tonumber(index)
    if i < 2 or i > #KEYS then return redis.error_reply('apply-batch: key index out of range') end
    layout[#layout + 1] = i
  end
  if ARGV[base + 1] ~= '' and #layout < 2 then return redis.error_reply('apply-batch: an update without streams') end
  layouts[#layouts + 1] = layout
end

local written = {}
local function store(layout, id, key, version, at, update, trace, order)
  local k = layout[1]
  local live = {}
  for n = 2, #layout do
    local j = layout[n]
    if all or redis.call('ZCOUNT', KEYS[j + 1], now, '+inf') > 0 then live[#live + 1] = j end
  end
  if #live == 0 then return -3 end
  local seq_key, ids, marks, last_seq = KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3]
  if redis.call('ZSCORE', ids, id) then return 0 end
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
  local seq = redis.call('INCR', seq_key)
  for _, j in ipairs(live) do
    if trace ~= '' then
      redis.call('XADD', KEYS[j], seq .. '-0', 'id', id, 'key', key, 'version', version, 'at', at, 'update', update,
        'w', order, 'trace', trace)
    else
      redis.call('XADD', KEYS[j], seq .. '-0', 'id', id, 'key', key, 'version', version, 'at', at, 'update', update,
        'w', order)
    end
    redis.call('HSET', last_seq, string.match(KEYS[j], ':stream:(%x+)$'), seq)
    written[KEYS[j]] = true
  end
  redis.call('ZADD', ids, seq, id)
  redis.call('ZREMRANGEBYSCORE', ids, '-inf', '(' .. (seq - window + 1))
  local next_version = version
  if next_version == '' then next_version = mark_version end
  local next_at = at
  if ma and (not a or ma > a) then next_at = mark_at end
  redis.call('HSET', marks, key, next_version .. '|' .. next_at)
  written[ids] = true
  written[marks] = true
  written[last_seq] = true
  return seq, #live
end

local stored = false
if field ~= '' then stored = redis.call('HGET', KEYS[1], field) end

local results = {}
local last = false
local record = 0
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
      local order = now .. string.format('%03d', record % 1000)
      local code, streams = store(layouts[record], id, ARGV[base + 2], ARGV[base + 3], ARGV[base + 4], ARGV[base + 5],
        ARGV[base + 6], order)
      results[#results + 1] = code
      results[#results + 1] = streams or 0
    end
  end
end

if field ~= '' and last then redis.call('HSET', KEYS[1], field, last) end
if ttl > 0 then
  for key in pairs(written) do redis.call('PEXPIRE', key, ttl) end
  if own_offsets then redis.call('PEXPIRE', KEYS[1], ttl) end
end
return results
