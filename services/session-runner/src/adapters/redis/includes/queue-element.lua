--[[
  A queue element (KEYS[3]) is a QueuedItem's JSON with `itemId` as its LAST property,
  ending `"itemId":"<id>"}` (enqueue.lua splices it in; session-scripts.ts encodeQueued
  writes requeued items so): an element's id is read at its end, without decoding, and only
  the element's tail is looked at (ids are short; the content may be long).

  itemIdOf(element): the element's item id, or nil.
  endsWithItemId(element, id): whether the element is the item `id`.
  withItemId(json, id): the JSON of a NewQueuedItem (an object without itemId) with `id` last.
]]
local function itemIdOf(element)
  return string.match(string.sub(element, -96), '"itemId":"([^"]*)"}$')
end
local function endsWithItemId(element, id)
  local tail = '"itemId":"' .. id .. '"}'
  return string.sub(element, -#tail) == tail
end
local function withItemId(json, id)
  local field = '"itemId":"' .. id .. '"'
  if json == '{}' then
    return '{' .. field .. '}'
  end
  return string.sub(json, 1, -2) .. ',' .. field .. '}'
end
