-- Settle one request: release its hold (if not reclaimed already: holds.lua), commit its true cost to
-- every budget counter that exists (never recreating one: a later seed from the ledger will
-- include this cost), add it to the spend counters, correct the token windows.
-- KEYS: [1] holds zset, [2..nb+1] budget counters, then ns spend counters, then nr windows.
-- ARGV: prefix, id, cost, nb, ns, nr, then ns ttls, then nr (delta) values.
-- Returns the spend (as strings, exact) of each budget counter, then of each spend counter;
-- {} when this settlement was applied already (a retry after a lost reply changes nothing).
local prefix, id, cost = ARGV[1], ARGV[2], ARGV[3]
local nb, ns, nr = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
if not redis.call('SET', prefix .. 'settled:' .. id, '1', 'NX', 'EX', 86400) then return {} end
release_hold(KEYS[1], prefix, id)
local out = {}
for i = 1, nb do
  local k = KEYS[1 + i]
  if redis.call('HEXISTS', k, 'spent') == 1 then
    if cost ~= '0' then redis.call('HINCRBY', k, 'spent', cost) end
    out[#out + 1] = redis.call('HGET', k, 'spent')
  else
    out[#out + 1] = '0'
  end
end
for i = 1, ns do
  local k = KEYS[1 + nb + i]
  if cost ~= '0' then
    redis.call('HINCRBY', k, 'spent', cost)
    redis.call('EXPIRE', k, ARGV[6 + i])
  end
  out[#out + 1] = redis.call('HGET', k, 'spent') or '0'
end
for j = 1, nr do
  local k = KEYS[1 + nb + ns + j]
  local delta = ARGV[6 + ns + j]
  if delta ~= '0' and redis.call('EXISTS', k) == 1 then redis.call('INCRBY', k, delta) end
end
return out
