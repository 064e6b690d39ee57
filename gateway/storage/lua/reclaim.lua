-- Shared prologue of admit.lua and the reclaim call: release holds past their deadline.
-- A hold is a hash PREFIX..'hold:'..id {amount, neg, counters}; its id sits in the sorted
-- set KEYS[1] scored by deadline. Releasing never recreates a counter that is gone.
local function reclaim(zset, prefix, now, limit)
  local expired = redis.call('ZRANGEBYSCORE', zset, '-inf', now, 'LIMIT', 0, limit)
  for _, id in ipairs(expired) do
    local hkey = prefix .. 'hold:' .. id
    local h = redis.call('HMGET', hkey, 'neg', 'counters')
    if h[1] then
      for c in string.gmatch(h[2], '[^\n]+') do
        if redis.call('EXISTS', c) == 1 then redis.call('HINCRBY', c, 'reserved', h[1]) end
      end
      redis.call('DEL', hkey)
    end
    redis.call('ZREM', zset, id)
  end
  return #expired
end
