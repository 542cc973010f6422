--[[
  Replaces what is stored of a partition's consumption (its last consumed offset and the
  topic id it belongs to) if it is still what the caller read.

  KEYS[1]: the offsets hash (stepContextKeys(prefix).offsets)
  ARGV[1]: JSON object (feed-scripts.ts rebindPartitionArgs):
    field     string: `<topic>:<partition>` (the offset); `<field>:topic-id` holds the topic
              id, `<field>:epoch` the number of resets (see below)
    expected  {offset, topicId}: what the caller read (an absent field: none stored)
    next      {offset, topicId}: the new offset (canonical decimal) and topic id (absent: none)
  A new offset other than the stored one is a reset: the epoch goes up by one, so on Redis
  Cluster the sources' own offsets of the partition (kept in field `<field>#<epoch>` of each
  source's offsets hash) start over.
  Returns: 1 when written, 0 when what is stored is not the expected (nothing written).
]]
local args = cjson.decode(ARGV[1])
local field = args.field
local offset = redis.call('HGET', KEYS[1], field) or ''
local topic_id = redis.call('HGET', KEYS[1], field .. ':topic-id') or ''
if offset ~= (args.expected.offset or '') or topic_id ~= (args.expected.topicId or '') then return 0 end
local nextOffset, nextTopicId = args.next.offset or '', args.next.topicId or ''
if nextOffset ~= offset then
  redis.call('HINCRBY', KEYS[1], field .. ':epoch', 1)
  if nextOffset == '' then redis.call('HDEL', KEYS[1], field) else redis.call('HSET', KEYS[1], field, nextOffset) end
end
if nextTopicId == '' then
  redis.call('HDEL', KEYS[1], field .. ':topic-id')
else
  redis.call('HSET', KEYS[1], field .. ':topic-id', nextTopicId)
end
return 1
