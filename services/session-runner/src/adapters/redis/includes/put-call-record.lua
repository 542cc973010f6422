--[[
  Call records (request-retention.ts), KEYS[5] the sites set and KEYS[6] the calls hash:
  putCallRecord(callId, call, callsKept, trimEvery) inserts or replaces one record (`call`, its
  JSON). A replaced call keeps its place in the calls' order (`<order> <JSON>`, order from the
  `counters` field `call`); a new one goes last, and every `trimEvery` new calls the records past
  the newest `callsKept` are deleted, with every call site of theirs (`<callId>|...`).
]]
--- @include "trim-oldest"

local function putCallRecord(callId, call, callsKept, trimEvery)
  local current = redis.call('HGET', KEYS[6], callId)
  local order
  if current then
    order = string.match(current, '^(%d+) ')
  end
  local fresh = false
  if not order then
    order = redis.call('HINCRBY', KEYS[9], 'call', 1)
    fresh = true
  end
  redis.call('HSET', KEYS[6], callId, order .. ' ' .. call)
  if fresh and order % trimEvery == 0 then
    local dropped = trimOldest(KEYS[6], callsKept)
    if #dropped > 0 then
      local gone = {}
      for _, id in ipairs(dropped) do
        gone[id] = true
      end
      local sites = {}
      for _, site in ipairs(redis.call('SMEMBERS', KEYS[5])) do
        local id = string.match(site, '^(.-)|')
        if id and gone[id] then
          sites[#sites + 1] = site
        end
      end
      for i = 1, #sites, 500 do
        redis.call('SREM', KEYS[5], unpack(sites, i, math.min(i + 499, #sites)))
      end
    end
  end
end
