-- KEYS: [1] holds zset. ARGV: prefix, now. Returns how many holds were released: past their
-- deadline, or of an owner whose lease has ended.
local now = tonumber(ARGV[2])
return reclaim(KEYS[1], ARGV[1], now, 10000) + reclaim_dead(KEYS[1], ARGV[1], now, 10000)
