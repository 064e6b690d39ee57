-- Seed counters that do not exist: KEYS counters; ARGV per counter (spent, ttl or '').
-- An existing counter wins (another replica seeded it first, or it already counts).
for i, k in ipairs(KEYS) do
  if redis.call('HSETNX', k, 'spent', ARGV[2 * i - 1]) == 1 then
    redis.call('HSET', k, 'reserved', '0')
    if ARGV[2 * i] ~= '' then redis.call('EXPIRE', k, ARGV[2 * i]) end
  end
end
return #KEYS
