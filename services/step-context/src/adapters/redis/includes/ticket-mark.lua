--[[
  The staleness mark of one ticket in its source (the `marks` hash, field: the ticket key):
  `<version>|<occurredAt ms>` of the newest stored update, either part '' when unknown.
  These functions mirror adapters/ticket-marks.ts (isStale, nextMark), which states the rule;
  test/contract/ticket-marks.test.ts proves they agree.

  isStale(mark, version, at): whether an update with `version` and `at` (decimal strings,
  '' when absent) is stale against `mark` (the hash value, or nil for none).
  nextMark(mark, version, at): the mark after storing that update.
]]
local function splitMark(mark)
  if not mark then return '', '' end
  local sep = string.find(mark, '|', 1, true)
  return string.sub(mark, 1, sep - 1), string.sub(mark, sep + 1)
end
local function isStale(mark, version, at)
  local markVersion, markAt = splitMark(mark)
  local v, mv = tonumber(version), tonumber(markVersion)
  if v and mv then return v < mv end
  local a, ma = tonumber(at), tonumber(markAt)
  return (a and ma and a < ma) or false
end
local function nextMark(mark, version, at)
  local markVersion, markAt = splitMark(mark)
  local nextVersion = version
  if nextVersion == '' then nextVersion = markVersion end
  local a, ma = tonumber(at), tonumber(markAt)
  local nextAt = at
  if ma and (not a or ma > a) then nextAt = markAt end
  return nextVersion .. '|' .. nextAt
end
