--[[
  Reads feed streams of one source since a position each, in one atomic step (a consistent
  cut: an update stored in several of them is in all or none).

  KEYS[1]: the source's `last` hash (stream digest -> seq of its last entry), `<tag>:last`;
           every stream read is `<tag>:stream:<digest>`: the same hash tag, so the same slot
           (the streams are not listed as keys: one argument each would cost the client more
           than the read)
  ARGV[1]: JSON object (feed-scripts.ts readStreamsArgs):
    count    number: most entries per stream
    streams  {digest, after}[]: a stream's digest, and the seq to read after (decimal string)
  Returns: a flat list, per stream with entries after its seq: its place among `streams`
  (1-based), then those entries as XRANGE answers them. A stream whose last entry is not
  after its seq is not read and not listed.
]]
local args = cjson.decode(ARGV[1])
local streams = args.streams
if #streams == 0 then return redis.error_reply('read-streams: no streams') end
local tag = string.sub(KEYS[1], 1, -6)
local digests = {}
for i, s in ipairs(streams) do digests[i] = s.digest end
local last = redis.call('HMGET', KEYS[1], unpack(digests))
local out = {}
for i, s in ipairs(streams) do
  local at = last[i]
  if at and tonumber(at) > tonumber(s.after) then
    out[#out + 1] = i
    out[#out + 1] = redis.call('XRANGE', tag .. ':stream:' .. s.digest, '(' .. s.after .. '-0', '+', 'COUNT', args.count)
  end
end
return out
