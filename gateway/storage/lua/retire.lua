-- A replica shutting down cleanly: release what it still holds and end its lease.
-- KEYS: [1] holds zset. ARGV: prefix, owner. Returns how many holds were released.
local released = release_owner(KEYS[1], ARGV[1], ARGV[2], 100000, false)
redis.call('ZREM', ARGV[1] .. 'owners', ARGV[2])
return released
