-- Replaces what is stored of a partition's consumption (its last consumed
-- offset and the topic id it belongs to) if it is still what the caller read.
-- KEYS[1]: the offsets hash (stepContextKeys(prefix).offsets)
-- ARGV[1]: field `<topic>:<partition>` (the offset); `<field>:topic-id` holds
--          the topic id, `<field>:epoch` the number of resets (see below)
-- ARGV[2], ARGV[3]: the expected offset and topic id ('' for none stored)
-- ARGV[4], ARGV[5]: the new offset (canonical decimal) and topic id ('' for none)
-- A new offset other than the stored one is a reset: the epoch goes up by one,
-- so on Redis Cluster the sources' own offsets of the partition (kept in field
-- `<field>#<epoch>` of each source's offsets hash) start over.
-- Returns: 1 when written, 0 when what is stored is not the expected (nothing written).

local field = ARGV[1]
local offset = redis.call('HGET', KEYS[1], field) or ''
local topic_id = redis.call('HGET', KEYS[1], field .. ':topic-id') or ''
if offset ~= ARGV[2] or topic_id ~= ARGV[3] then return 0 end
if ARGV[4] ~= offset then
  redis.call('HINCRBY', KEYS[1], field .. ':epoch', 1)
  if ARGV[4] == '' then redis.call('HDEL', KEYS[1], field) else redis.call('HSET', KEYS[1], field, ARGV[4]) end
end
if ARGV[5] == '' then
  redis.call('HDEL', KEYS[1], field .. ':topic-id')
else
  redis.call('HSET', KEYS[1], field .. ':topic-id', ARGV[5])
end
return 1
