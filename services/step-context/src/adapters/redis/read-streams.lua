-- Reads feed streams of one source since a position each, in one atomic step (a
-- consistent cut: an update stored in several of them is in all or none).
-- KEYS[1]: the source's `last` hash (stream digest -> seq of its last entry),
--          `<tag>:last`; every stream read is `<tag>:stream:<digest>`: the same hash
--          tag, so the same slot (the streams are not listed as keys: one argument
--          each would cost the client more than the read)
-- ARGV[1]: most entries per stream
-- ARGV[2]: the streams' digests, space separated
-- ARGV[3]: per stream, the seq to read after (decimal), space separated
-- Returns: a flat list, per stream with entries after its seq: its place among the
-- digests (1-based), then those entries as XRANGE answers them. A stream whose last
-- entry is not after its seq is not read and not listed.

local count = ARGV[1]
local tag = string.sub(KEYS[1], 1, -6)
local digests, froms = {}, {}
for d in string.gmatch(ARGV[2], '%S+') do digests[#digests + 1] = d end
for f in string.gmatch(ARGV[3], '%S+') do froms[#froms + 1] = f end
if #digests ~= #froms or #digests == 0 then return redis.error_reply('read-streams: malformed arguments') end
local last = redis.call('HMGET', KEYS[1], unpack(digests))
local out = {}
for i = 1, #digests do
  local at = last[i]
  if at and tonumber(at) > tonumber(froms[i]) then
    out[#out + 1] = i
    out[#out + 1] = redis.call('XRANGE', tag .. ':stream:' .. digests[i], '(' .. froms[i] .. '-0', '+', 'COUNT', count)
  end
end
return out
