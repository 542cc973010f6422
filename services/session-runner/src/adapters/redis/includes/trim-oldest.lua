--[[
  Record retention (request-retention.ts): trimOldest(key, keep) deletes the fields of the hash
  `key` past its newest `keep`, oldest first by the order each value starts with (`<n> ...`; a
  value without one sorts first). Returns the deleted fields.
]]
local function trimOldest(key, keep)
  if redis.call('HLEN', key) <= keep then
    return {}
  end
  local flat = redis.call('HGETALL', key)
  local records = {}
  for i = 1, #flat, 2 do
    records[#records + 1] = { flat[i], tonumber(string.match(flat[i + 1], '^(%d+) ')) or 0 }
  end
  table.sort(records, function(a, b)
    return a[2] < b[2]
  end)
  local dropped = {}
  for i = 1, #records - keep do
    dropped[i] = records[i][1]
  end
  for i = 1, #dropped, 500 do
    redis.call('HDEL', key, unpack(dropped, i, math.min(i + 499, #dropped)))
  end
  return dropped
end
