-- Admit one request: check every rate limit and every budget; count and hold only if all pass.
-- KEYS: [1] holds zset, [2..nb+1] budget counters, then per rate limit (current, previous) window.
-- ARGV: prefix, now, deadline, id, want, nb, nr, hold_ttl, owner ('' for none), lease_until,
--       nb budget limits, then per rate limit (maximum, amount, window_s, sliding 0|1, ttl),
--       then the hold's first checkpoint ('' for none: what to charge if its owner dies first).
-- Money stays in strings handed to HINCRBY (exact int64); Lua numbers (doubles) are used only
-- to compare, where they are exact up to 2^53 pico-dollars ($9007) and off by < 1e-15 beyond.
-- A budget that does not fit first gets the holds of dead replicas back (reclaim_dead), so a
-- refusal is never caused by what a dead replica held.
-- Returns {0, used...} admitted, {1, j, retry_after_s} rate limit j, {2, i} budget i, {3, missing...};
-- used: each rate limit's use (whole units, this request counted), for the rate-limit headers.
local prefix, now, deadline, id, want = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5]
local nb, nr, hold_ttl, owner, lease_until = tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8], ARGV[9], ARGV[10]
reclaim(KEYS[1], prefix, now, 100)

local missing, spent, reserved = {}, {}, {}
for i = 1, nb do
  local v = redis.call('HMGET', KEYS[1 + i], 'spent', 'reserved')
  if v[1] then
    spent[i], reserved[i] = tonumber(v[1]), tonumber(v[2] or '0')
  else
    missing[#missing + 1] = KEYS[1 + i]
  end
end
if #missing > 0 then
  table.insert(missing, 1, 3)
  return missing
end

local a = 11 + nb
local usage = {0}
for j = 1, nr do
  local maximum, amount, win = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local used = tonumber(redis.call('GET', KEYS[nb + 2 * j]) or '0')
  if ARGV[a + 3] == '1' then
    local previous = tonumber(redis.call('GET', KEYS[nb + 2 * j + 1]) or '0')
    used = used + previous * (1 - (now % win) / win)
  end
  if used + amount > maximum then
    return {1, j, math.max(1, math.ceil(win - (now % win)))}
  end
  usage[j + 1] = math.ceil(used + amount)
  a = a + 5
end

local w = tonumber(want)
local function over_budget()
  for i = 1, nb do
    if spent[i] + reserved[i] + w > tonumber(ARGV[10 + i]) then return i end
  end
  return nil
end
local failed = over_budget()
if failed and reclaim_dead(KEYS[1], prefix, now, 10000) > 0 then
  for i = 1, nb do reserved[i] = tonumber(redis.call('HGET', KEYS[1 + i], 'reserved') or '0') end
  failed = over_budget()
end
if failed then return {2, failed} end

a = 11 + nb
for j = 1, nr do
  local k, amount = KEYS[nb + 2 * j], ARGV[a + 1]
  -- the increment that creates a window's counter sets its expiry (it returns exactly amount)
  if amount ~= '0' and redis.call('INCRBY', k, amount) == tonumber(amount) then
    redis.call('EXPIRE', k, ARGV[a + 4])
  end
  a = a + 5
end
if nb > 0 and want ~= '0' then
  local names = {}
  for i = 1, nb do
    redis.call('HINCRBY', KEYS[1 + i], 'reserved', want)
    names[i] = KEYS[1 + i]
  end
  local hkey = prefix .. 'hold:' .. id
  redis.call('HSET', hkey, 'amount', want, 'neg', '-' .. want, 'counters', table.concat(names, '\n'))
  if owner ~= '' then
    redis.call('HSET', hkey, 'owner', owner)
    if ARGV[a] and ARGV[a] ~= '' then redis.call('HSET', hkey, 'checkpoint', ARGV[a]) end
    local owned = prefix .. 'owned:' .. owner
    redis.call('SADD', owned, id)
    redis.call('EXPIRE', owned, hold_ttl)
    -- admitting proves the owner alive: its lease runs at least to lease_until
    local current = redis.call('ZSCORE', prefix .. 'owners', owner)
    if not current or tonumber(current) < tonumber(lease_until) then
      redis.call('ZADD', prefix .. 'owners', lease_until, owner)
    end
  end
  redis.call('EXPIRE', hkey, hold_ttl)
  redis.call('ZADD', KEYS[1], deadline, id)
end
return usage
