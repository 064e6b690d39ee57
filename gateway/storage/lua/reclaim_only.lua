-- KEYS: [1] holds zset. ARGV: prefix, now. Returns how many holds were released.
return reclaim(KEYS[1], ARGV[1], tonumber(ARGV[2]), 10000)
