--[[
  writeMeta(json): stores the SessionMeta JSON whole (KEYS[1]) and drops the meta's counters
  a step commit wrote apart (`counters` fields steps, stepAt, requestEnd, fold: commit-step.lua),
  which no longer apply.
]]
local function writeMeta(json)
  redis.call('SET', KEYS[1], json)
  redis.call('HDEL', KEYS[9], 'steps', 'stepAt', 'requestEnd', 'fold')
end
