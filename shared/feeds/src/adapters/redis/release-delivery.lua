--[[
  Drops an unconfirmed delivery lease; a confirmed delivery stays done.

  KEYS[1]: the delivery key (ledgerKeys(prefix).delivery(id))
  ARGV: none
  Returns: 1 when a lease was dropped, 0 otherwise.
]]
if redis.call('GET', KEYS[1]) == 'pending' then
  return redis.call('DEL', KEYS[1])
end
return 0
