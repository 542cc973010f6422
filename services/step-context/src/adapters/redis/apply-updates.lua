--[[
  Stores ticket updates in the feed streams they belong to: a run of consumed records
  (ONE bus partition, in offset order) with the last consumed offset recorded, or one plain
  append (no offset), in ONE atomic step (exactly-once from the bus). Each update is stored
  once per stream that has a live follower, whatever the number of followers.

  KEYS[1]: the offsets hash: stepContextKeys(prefix).offsets on a single Redis, or the
           source's own `.source(tenant, source).offsets` on Redis Cluster (one source per call)
  KEYS[2..]: the keys the records' layouts name: per source its seq, ids, marks, last (four
           in a row); per stream its stream (`...:stream:<digest>`) and followers (two in a row)
  ARGV[1]: JSON object (feed-scripts.ts applyUpdatesArgs); an absent field is nil:
    field       string: offsets field of the partition; absent for plain appends (no offset
                read or written)
    ttlMs       number: retention (0 none): each stream written, the ids and marks get it
    now         string: epoch ms (decimal): a follower whose expiry is below it is gone
    ownOffsets  true when KEYS[1] is the source's own offsets hash (Redis Cluster): it gets
                the retention
    all         true: write every listed stream (plain appends); absent: only streams with a
                live follower
    window      number: the dedupe window: how many of the source's last stored ids are kept
    records     in offset order, each:
      offset    string: canonical decimal (includes/offsets.lua), strictly increasing; absent
                without `field`
      id        string: the update id; absent for a record with nothing to apply (a poison
                record: only its offset counts), and then no other field
      key       string: ticket key `<source>:<ticket>`
      version   string: decimal, or absent
      at        string: occurredAt in epoch ms (decimal), or absent
      update    string: the update, JSON
      trace     string: W3C traceparent stored with each new entry (field `trace`), or absent
      layout    number[]: KEYS index of the source's seq, then of each candidate stream
  Each entry also gets field `w`, its write order across sources: `now` then the record's
  place in the call on three digits (epoch ms x 1000 + place).
  Offset check: a record at or below the stored offset was consumed before and is skipped
  (nothing written for it); offsets increase, so what is skipped is a prefix. The field is
  then set to the offset of the last record, unless every record was skipped.
  Dedupe and staleness: the rule of ports/feed-streams.ts, per source among stored updates
  (includes/ticket-mark.lua).
  Returns: a flat table, per record in order: -1 when skipped; otherwise 1, and for a record
    with an update two more: the new seq (> 0), 0 duplicate, -2 stale, -3 unwatched (no live
    follower); then how many streams it was stored in.
  Errors (before any write): a key index out of range, an update without streams.
]]
--- @include "includes/offsets"
--- @include "includes/ticket-mark"

local args = cjson.decode(ARGV[1])
local field = args.field
local ttl = tonumber(args.ttlMs) or 0
local now = args.now
local window = tonumber(args.window) or 10000
local records = args.records

-- Validate every layout before the first write (a script is never rolled back).
for _, r in ipairs(records) do
  for _, i in ipairs(r.layout or {}) do
    if i < 2 or i > #KEYS then return redis.error_reply('apply-updates: key index out of range') end
  end
  if r.id and #(r.layout or {}) < 2 then return redis.error_reply('apply-updates: an update without streams') end
end

local written = {}
local function store(r, order)
  local layout = r.layout
  local k = layout[1]
  local live = {}
  for n = 2, #layout do
    local j = layout[n]
    if args.all or redis.call('ZCOUNT', KEYS[j + 1], now, '+inf') > 0 then live[#live + 1] = j end
  end
  if #live == 0 then return -3 end
  local seq_key, ids, marks, last_seq = KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3]
  local id = r.id
  if redis.call('ZSCORE', ids, id) then return 0 end
  local version, at = r.version or '', r.at or ''
  local mark = redis.call('HGET', marks, r.key)
  if isStale(mark, version, at) then return -2 end
  local seq = redis.call('INCR', seq_key)
  for _, j in ipairs(live) do
    if r.trace then
      redis.call('XADD', KEYS[j], seq .. '-0', 'id', id, 'key', r.key, 'version', version, 'at', at, 'update',
        r.update, 'w', order, 'trace', r.trace)
    else
      redis.call('XADD', KEYS[j], seq .. '-0', 'id', id, 'key', r.key, 'version', version, 'at', at, 'update',
        r.update, 'w', order)
    end
    redis.call('HSET', last_seq, string.match(KEYS[j], ':stream:(%x+)$'), seq)
    written[KEYS[j]] = true
  end
  redis.call('ZADD', ids, seq, id)
  redis.call('ZREMRANGEBYSCORE', ids, '-inf', '(' .. (seq - window + 1))
  redis.call('HSET', marks, r.key, nextMark(mark, version, at))
  written[ids] = true
  written[marks] = true
  written[last_seq] = true
  return seq, #live
end

local stored = false
if field then stored = redis.call('HGET', KEYS[1], field) end

local results = {}
local last = false
for place, r in ipairs(records) do
  if stored and not offsetAbove(r.offset, stored) then
    results[#results + 1] = -1
  else
    results[#results + 1] = 1
    last = r.offset
    if r.id then
      local code, streams = store(r, now .. string.format('%03d', place % 1000))
      results[#results + 1] = code
      results[#results + 1] = streams or 0
    end
  end
end

if field and last then redis.call('HSET', KEYS[1], field, last) end
if ttl > 0 then
  for key in pairs(written) do redis.call('PEXPIRE', key, ttl) end
  if args.ownOffsets then redis.call('PEXPIRE', KEYS[1], ttl) end
end
return results
